//! Two live sessions in one workspace: rewinding one never silently undoes the other's edits.

use std::sync::Arc;

use keel::engine::SessionEndReason;
use keel::provider::ContentBlock;
use keel_host::rewind::Rewound;
use keel_host::{HostError, Opening, Ownership, SessionHost, TaskWait};
use keel_test_support::scripted::ScriptedProvider;
use serde_json::json;

use crate::support::ScriptedSessions;

fn writing(path: &str, content: &str) -> Arc<ScriptedProvider> {
    Arc::new(
        ScriptedProvider::new()
            .then_tool_call(
                "call_1",
                "write_file",
                json!({ "path": path, "content": content }),
            )
            .then_text("written"),
    )
}

#[tokio::test]
async fn rewinding_over_another_live_session_s_edits_is_refused_naming_them() {
    let (cwd, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(cwd.path().join("a.txt"), "old a\n").unwrap();
    let host = SessionHost::default();
    let first = ScriptedSessions::new(writing("a.txt", "new a\n"), cwd.path(), home.path());
    let second = ScriptedSessions::new(writing("b.txt", "new b\n"), cwd.path(), home.path());
    let one = host
        .open(&first, &Opening::New { cwd: None }, Ownership::default())
        .await
        .unwrap()
        .session;
    let two = host
        .open(&second, &Opening::New { cwd: None }, Ownership::default())
        .await
        .unwrap()
        .session;
    for live in [&one, &two] {
        let outcome = live
            .run_turn(vec![ContentBlock::text("write")], TaskWait::Leave)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(outcome.text, "written");
    }
    let Rewound::Listed(snapshots) = host.rewind(&one.id(), None).await.unwrap() else {
        panic!("listed");
    };
    assert_eq!(snapshots.len(), 2, "{snapshots:?}");
    assert_eq!(snapshots[0].point.session_id, one.id());

    // The first session's snapshot is older than the second's edit: refused, nothing touched.
    let refused = host.rewind(&one.id(), Some("1".into())).await;
    let Err(HostError::Invalid(reason)) = &refused else {
        panic!("{refused:?}");
    };
    let short: String = two.id().chars().take(8).collect();
    assert!(
        reason.contains(&short) && reason.contains("b.txt"),
        "{reason}"
    );
    assert_eq!(
        std::fs::read_to_string(cwd.path().join("a.txt")).unwrap(),
        "new a\n"
    );
    assert!(cwd.path().join("b.txt").exists());

    // Rewinding the second session to its own snapshot undoes only its edit.
    let Rewound::Restored(restored) = host.rewind(&two.id(), Some("2".into())).await.unwrap()
    else {
        panic!("restored");
    };
    assert_eq!(restored.1.removed.len(), 1, "{:?}", restored.1);
    assert!(!cwd.path().join("b.txt").exists());
    assert_eq!(
        std::fs::read_to_string(cwd.path().join("a.txt")).unwrap(),
        "new a\n"
    );

    // Once the other session has ended, nothing stands in the way.
    host.close(&two.id(), SessionEndReason::Other)
        .await
        .unwrap();
    let restored = host.rewind(&one.id(), Some("1".into())).await;
    assert!(matches!(restored, Ok(Rewound::Restored(_))), "{restored:?}");
    assert_eq!(
        std::fs::read_to_string(cwd.path().join("a.txt")).unwrap(),
        "old a\n"
    );
}
