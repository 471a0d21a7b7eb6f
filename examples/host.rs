//! A session host of your own: two sessions at once, in two workspaces, whose approval
//! questions the host answers itself — a build directory may be deleted, nothing else — while
//! it watches both sessions' events as they come.
//!
//! ```sh
//! cargo run -p keel-host --example host
//! ```
//!
//! The models are SCRIPTED stand-ins (no API key, no network); the agent, its sandboxed
//! tools, the session host and its approval broker are keel's own.

// An example talks to its user on stdout.
#![allow(clippy::print_stdout)]
// keel-host's tests/it/example.rs includes this file and reads its report.
#![allow(unreachable_pub, dead_code)]

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel::CodingAgent;
use keel::engine::{ApprovalRequest, Approver, Decision};
use keel::prelude::async_trait;
use keel::provider::ContentBlock;
use keel_config::LiveMode;
use keel_host::{
    Answer, Answers, HostError, HostEvent, ModeApprover, Opening, Ownership, SessionFactory,
    SessionHost, SessionParts, TaskWait,
};
use keel_test_support::scripted::ScriptedProvider;
use serde_json::json;

/// The host's own policy for gated calls: deleting `build` is fine, anything else is not.
struct HostPolicy;

#[async_trait]
impl Approver for HostPolicy {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        let command = request.input["command"].as_str().unwrap_or_default();
        if command.trim() == "rm -rf build" {
            Decision::Allow
        } else {
            Decision::Deny(format!(
                "this host deletes build directories only, not `{command}`"
            ))
        }
    }
}

/// Sessions of an agent on a scripted model that runs `command`, in `workspace`.
struct ScriptedAgent {
    workspace: PathBuf,
    home: PathBuf,
    command: &'static str,
}

#[async_trait]
impl SessionFactory for ScriptedAgent {
    async fn open(&self, _opening: &Opening, answers: Answers) -> Result<SessionParts, HostError> {
        let model = ScriptedProvider::new()
            .then_tool_call("call_1", "run_command", json!({ "command": self.command }))
            .then_text("done");
        // Gated calls are asked about; the host's answerers answer.
        let approver = ModeApprover::starting(LiveMode::Ask, Some(Arc::new(answers)));
        let mode = approver.switch();
        let failed = |err: &dyn std::fmt::Display| HostError::Failed(err.to_string());
        let coding = CodingAgent::builder(Arc::new(model))
            .cwd(&self.workspace)
            .home(&self.home)
            .approver(approver)
            .delegation(false)
            .build()
            .map_err(|err| failed(&err))?;
        let session = coding.session().map_err(|err| failed(&err))?;
        Ok(SessionParts {
            coding,
            session,
            mode,
        })
    }
}

/// What one session did.
#[derive(Debug)]
pub struct SessionReport {
    /// The command its model ran.
    pub command: &'static str,
    /// The host's answer to its question.
    pub answer: Option<Answer>,
    /// How its turn ended.
    pub stop: Option<String>,
    /// Whether its workspace still has `build/`.
    pub build_left: bool,
    /// Whether its workspace still has `src/`.
    pub src_left: bool,
}

/// Runs the two sessions at once in fresh workspaces under `dir`; what each did.
pub async fn run(dir: &Path) -> Result<Vec<SessionReport>, Box<dyn Error>> {
    let host = SessionHost::default();
    let home = dir.join("keel-home");
    let mut sessions = Vec::new();
    for (name, command) in [("a", "rm -rf build"), ("b", "rm -rf src")] {
        let workspace = dir.join(name);
        std::fs::create_dir_all(workspace.join("build"))?;
        std::fs::create_dir_all(workspace.join("src"))?;
        std::fs::write(workspace.join("src/main.rs"), "fn main() {}\n")?;
        let agent = ScriptedAgent {
            workspace: workspace.clone(),
            home: home.clone(),
            command,
        };
        let opened = host
            .open(&agent, &Opening::New { cwd: None }, Ownership::default())
            .await?;
        // The host answers its sessions' questions itself.
        opened
            .session
            .answer_with(&opened.owner, Arc::new(HostPolicy))?;
        sessions.push((name, command, workspace, opened));
    }
    // Both turns at once; each session's events watched as they come.
    let watched = sessions
        .iter_mut()
        .map(|(name, command, workspace, opened)| {
            let (name, command, workspace) = (*name, *command, workspace.clone());
            async move {
                let turn = opened
                    .session
                    .start_turn(vec![ContentBlock::text("clean up")], TaskWait::Leave)?;
                let mut answer = None;
                let mut stop = None;
                while let Some(event) = opened.owner.next().await {
                    match event {
                        HostEvent::Question(question) => {
                            println!("[{name}] asked #{}", question.id)
                        }
                        HostEvent::Answered {
                            answer: given, by, ..
                        } => {
                            println!("[{name}] answered by {by:?}: {given:?}");
                            answer = Some(given);
                        }
                        HostEvent::TurnEnded {
                            turn: ended,
                            outcome,
                        } if ended == turn.number => {
                            stop = outcome.map(|outcome| outcome.stop.name().to_owned());
                            println!("[{name}] turn ended: {}", stop.as_deref().unwrap_or("?"));
                            break;
                        }
                        _ => {}
                    }
                }
                Ok::<_, HostError>(SessionReport {
                    command,
                    answer,
                    stop,
                    build_left: workspace.join("build").exists(),
                    src_left: workspace.join("src").exists(),
                })
            }
        });
    let reports = futures::future::join_all(watched).await;
    let mut done = Vec::new();
    for report in reports {
        done.push(report?);
    }
    println!("live sessions: {}", host.list().await.len());
    Ok(done)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    for report in run(dir.path()).await? {
        println!(
            "{}: {} — build/ {}, src/ {}",
            report.command,
            report.stop.as_deref().unwrap_or("no outcome"),
            if report.build_left { "kept" } else { "deleted" },
            if report.src_left { "kept" } else { "deleted" },
        );
    }
    Ok(())
}
