//! A project's trust, recorded and read back through the library a host uses: what an
//! untrusted project may set, what trust grants, and that any edit withdraws it.

use std::path::Path;

use keel_config::files::{Config, Sources, Trust};
use keel_config::{ApprovalMode, SettingSources, trust};

const POWERFUL: &str = "approvals = \"allow\"\n\n[permissions]\ndeny = [\"run_command(curl*)\"]\n";

fn load(keel_home: &Path, cwd: &Path) -> Config {
    Config::load(&Sources {
        keel_home: Some(keel_home),
        claude_home: None,
        cwd,
        trust_project: false,
        claude_files: SettingSources::default(),
        settings: None,
    })
    .unwrap()
}

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".keel")).unwrap();
    std::fs::write(dir.path().join(".keel/config.toml"), POWERFUL).unwrap();
    dir
}

#[test]
fn an_untrusted_project_tightens_and_a_recorded_trust_grants_until_an_edit() {
    let (home, project) = (tempfile::tempdir().unwrap(), project());
    let dir = std::fs::canonicalize(project.path()).unwrap();

    let untrusted = load(home.path(), &dir);
    assert_eq!(
        untrusted.approvals, None,
        "an untrusted project may not allow"
    );
    assert!(
        untrusted
            .permissions
            .deny
            .contains(&"run_command(curl*)".to_owned())
    );
    let notice = untrusted.project.as_ref().unwrap().notice().unwrap();
    assert!(notice.contains("approvals"), "{notice}");

    // Trust, as `keel trust` records it: pinned to the files as they are.
    let hash = keel_config::files::project::config_hash(&dir);
    trust::record(home.path(), &dir, &hash, true).unwrap();
    let trusted = load(home.path(), &dir);
    assert_eq!(trusted.approvals, Some(ApprovalMode::Allow));
    assert_eq!(trusted.project.as_ref().unwrap().trust, Trust::Trusted);

    // The model (or a pull) edits the file: the trust lapses.
    std::fs::write(
        dir.join(".keel/config.toml"),
        format!("{POWERFUL}\n[sandbox]\nmode = \"full-access\"\n"),
    )
    .unwrap();
    let changed = load(home.path(), &dir);
    assert_eq!(changed.project.as_ref().unwrap().trust, Trust::Changed);
    assert_eq!(changed.approvals, None);
    assert_eq!(changed.sandbox, None);
}

#[test]
fn the_record_keeps_the_user_s_file_and_is_readable_by_the_user_alone() {
    use std::os::unix::fs::PermissionsExt;
    let (home, project) = (tempfile::tempdir().unwrap(), project());
    let dir = std::fs::canonicalize(project.path()).unwrap();
    let config = home.path().join("config.toml");
    std::fs::write(&config, "# my settings\nmodel = \"sonnet\"\n").unwrap();
    let hash = keel_config::files::project::config_hash(&dir);
    trust::record(home.path(), &dir, &hash, true).unwrap();
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        text.starts_with("# my settings\nmodel = \"sonnet\"\n"),
        "{text}"
    );
    assert!(text.contains(&hash), "{text}");
    assert!(trust::forget(home.path(), &dir).unwrap());
    assert!(
        !trust::forget(home.path(), &dir).unwrap(),
        "forgotten already"
    );
    assert!(!std::fs::read_to_string(&config).unwrap().contains(&hash));

    let fresh = tempfile::tempdir().unwrap();
    trust::record(fresh.path(), &dir, &hash, false).unwrap();
    let mode = std::fs::metadata(fresh.path().join("config.toml"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_record_that_would_break_the_user_s_config_is_refused() {
    let (home, project) = (tempfile::tempdir().unwrap(), project());
    let dir = std::fs::canonicalize(project.path()).unwrap();
    let config = home.path().join("config.toml");
    std::fs::write(&config, "projects = 3\n").unwrap();
    let err = trust::record(home.path(), &dir, "hash", true).unwrap_err();
    assert!(err.contains("`projects` is not a table"), "{err}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "projects = 3\n");
}
