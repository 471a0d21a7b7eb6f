//! Sub-agents and teams over the Anthropic wire format served by wiremock: what a sub-agent's
//! requests hold, its limits, the parent's approver, and team pipelines.

// Tests report failures by panicking.
#![cfg(feature = "delegation")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;

use keel_agents::{
    AgentDefinitions, Delegation, Models, Policies, RunTeamTool, SpawnAgentTool, SubAgentLimits,
    SubAgentRunner, TeamDefinitions,
};
use keel_engine::{Agent, Stop};
use keel_provider::{AnthropicProvider, ApiKey, ContentBlock, StopReason, ToolUseResponse};
use keel_sandbox::{PathSandbox, SandboxPolicy, default_tools};
use keel_snapshot::{ShadowSnapshots, SnapshotLimits, Snapshots};
use keel_test_support::git::TempRepo;
use keel_test_support::mock::{request_bodies, serve_anthropic_replies as server};
use keel_test_support::scripted::{REPLY_USAGE, reply, text_reply as text, tool_reply as call};
use serde_json::{Value, json};
use wiremock::MockServer;

fn write_agent(dir: &Path, name: &str, front: &str, body: &str) {
    let agents = dir.join(".keel/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join(format!("{name}.md")),
        format!("---\n{front}\n---\n{body}\n"),
    )
    .unwrap();
}

/// The main agent with the default tools, `spawn_agent` and `run_team`, refusing gated calls.
fn parent(server: &MockServer, dir: &Path, limits: SubAgentLimits) -> Agent {
    parent_with_snapshots(server, dir, limits, None)
}

/// [`parent`], whose delegated runs snapshot the workspace in `snapshots`.
fn parent_with_snapshots(
    server: &MockServer,
    dir: &Path,
    limits: SubAgentLimits,
    snapshots: Option<Arc<dyn Snapshots>>,
) -> Agent {
    let provider = Arc::new(
        AnthropicProvider::new(ApiKey::new("sk-ant-test"))
            .unwrap()
            .with_base_url(&server.uri())
            .unwrap(),
    );
    let mut delegation = Delegation::new(
        provider.clone(),
        Models::new("claude-sonnet-4-5", "claude-haiku-4-5"),
        Policies::new(SandboxPolicy::default()),
    );
    if let Some(snapshots) = snapshots {
        delegation = delegation.snapshots(snapshots);
    }
    let base = default_tools(&PathSandbox::new(dir).unwrap(), &SandboxPolicy::default()).unwrap();
    let dirs = AgentDefinitions::standard_dirs(dir, None);
    let (agents, warnings) = AgentDefinitions::discover(&dirs);
    assert!(warnings.is_empty(), "{warnings:?}");
    let (teams, warnings) = TeamDefinitions::discover(&TeamDefinitions::standard_dirs(dir, None));
    assert!(warnings.is_empty(), "{warnings:?}");
    let runner = Arc::new(SubAgentRunner::new(
        delegation,
        Arc::new(agents),
        base.clone(),
        limits,
    ));
    let tools = base
        .with(SpawnAgentTool::new(runner.clone()))
        .unwrap()
        .with(RunTeamTool::new(runner, Arc::new(teams)))
        .unwrap();
    Agent::builder(provider)
        .model("claude-sonnet-4-5")
        .tools(tools)
        .build()
        .unwrap()
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The text of the tool result answering the parent's first call.
fn first_result(bodies: &[Value]) -> String {
    let last = bodies.last().unwrap();
    let messages = last["messages"].as_array().unwrap();
    messages[2]["content"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_sub_agent_sees_only_its_prompt_its_task_and_its_narrowed_tools() {
    let repo = TempRepo::new();
    write_agent(
        &repo.path(),
        "reviewer",
        "name: reviewer\ndescription: Reviews code for bugs\ntools: [grep, glob]\nmodel: fast",
        "You review code. Report bugs only.",
    );
    let server = server(&[
        call(
            "toolu_1",
            "spawn_agent",
            json!({"agent": "reviewer", "task": "Review src/lib.rs"}),
        ),
        text("No bugs found."),
        text("The reviewer found no bugs."),
    ])
    .await;
    let agent = parent(&server, &repo.path(), SubAgentLimits::default());
    let mut session = agent.session(repo.path()).unwrap();
    let outcome = session
        .run("Secret context the sub-agent must not see. Ask the reviewer.")
        .await;
    assert_eq!(outcome.stop, Stop::Completed, "{}", outcome.text);
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 3);
    // The parent's description lists the agents.
    let spawn = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "spawn_agent")
        .unwrap();
    assert!(
        spawn["description"]
            .as_str()
            .unwrap()
            .ends_with("\n- reviewer: Reviews code for bugs")
    );
    let sub = &bodies[1];
    assert_eq!(sub["model"], "claude-haiku-4-5", "fast is the small model");
    assert_eq!(
        sub["system"][0]["text"]
            .as_str()
            .unwrap_or_else(|| sub["system"].as_str().unwrap()),
        "You review code. Report bugs only."
    );
    assert_eq!(
        sub["messages"],
        json!([{"role": "user", "content": [{
            "type": "text",
            "text": "Review src/lib.rs",
            "cache_control": {"type": "ephemeral"}
        }]}])
    );
    assert_eq!(tool_names(sub), ["glob", "grep", "read_file"]);
    assert!(
        !serde_json::to_string(sub)
            .unwrap()
            .contains("Secret context")
    );
    let result = first_result(&bodies);
    assert_eq!(
        result,
        "No bugs found.\n\n[agent reviewer: 1 step, 20 output tokens]"
    );
}

/// `spawn_agent` runs alongside other read-only calls, so the parent takes no snapshot before
/// it: the sub-agent's own session snapshots before each of its writes, and a rewind undoes
/// them.
#[tokio::test]
async fn a_sub_agents_writes_are_snapshotted_and_can_be_rewound() {
    let repo = TempRepo::new();
    repo.write("notes.txt", "the original\n");
    write_agent(
        &repo.path(),
        "writer",
        "name: writer\ndescription: Writes notes\ntools: [write_file]",
        "You write notes.",
    );
    let server = server(&[
        call(
            "toolu_1",
            "spawn_agent",
            json!({"agent": "writer", "task": "Rewrite the notes"}),
        ),
        call(
            "toolu_w",
            "write_file",
            json!({"path": "notes.txt", "content": "overwritten by a sub-agent\n"}),
        ),
        text("Rewritten."),
        text("The writer rewrote the notes."),
    ])
    .await;
    let store = tempfile::tempdir().unwrap();
    let snapshots = Arc::new(
        ShadowSnapshots::open(store.path(), repo.path(), SnapshotLimits::default()).unwrap(),
    );
    let agent = parent_with_snapshots(
        &server,
        &repo.path(),
        SubAgentLimits::default(),
        Some(snapshots.clone()),
    );
    let outcome = agent
        .session(repo.path())
        .unwrap()
        .run("Ask the writer.")
        .await;
    assert_eq!(outcome.stop, Stop::Completed, "{}", outcome.text);
    assert_eq!(
        std::fs::read_to_string(repo.path().join("notes.txt")).unwrap(),
        "overwritten by a sub-agent\n"
    );
    let taken = snapshots.list().unwrap();
    assert_eq!(taken.len(), 1, "{taken:?}");
    assert_eq!(taken[0].point.tool, "write_file");
    assert_eq!(taken[0].point.call_id, "toolu_w");
    snapshots.restore(&taken[0].id.0).unwrap();
    assert_eq!(
        std::fs::read_to_string(repo.path().join("notes.txt")).unwrap(),
        "the original\n"
    );
}

#[tokio::test]
async fn the_step_cap_ends_a_runaway_sub_agent_cleanly() {
    let repo = TempRepo::new();
    repo.write("a.txt", "a\n");
    write_agent(
        &repo.path(),
        "looper",
        "description: Loops\nmax_steps: 2",
        "You loop.",
    );
    let server = server(&[
        call(
            "toolu_1",
            "spawn_agent",
            json!({"agent": "looper", "task": "Go"}),
        ),
        call("toolu_s1", "read_file", json!({"path": "a.txt"})),
        call("toolu_s2", "read_file", json!({"path": "a.txt"})),
        text("The looper hit its cap."),
    ])
    .await;
    let agent = parent(&server, &repo.path(), SubAgentLimits::default());
    let outcome = agent
        .session(repo.path())
        .unwrap()
        .run("Run the looper")
        .await;
    assert_eq!(outcome.stop, Stop::Completed, "{}", outcome.text);
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 4, "two sub-agent calls, no more");
    let result = first_result(&bodies);
    assert!(
        result.ends_with("[agent looper: 2 steps, 40 output tokens, error: stopped at the step cap (2 model calls)]"),
        "{result}"
    );
}

#[tokio::test]
async fn the_token_budget_ends_a_runaway_sub_agent_cleanly() {
    let repo = TempRepo::new();
    repo.write("a.txt", "a\n");
    write_agent(&repo.path(), "talker", "description: Talks", "You talk.");
    let server = server(&[
        call(
            "toolu_1",
            "spawn_agent",
            json!({"agent": "talker", "task": "Go"}),
        ),
        call("toolu_s1", "read_file", json!({"path": "a.txt"})),
        call("toolu_s2", "read_file", json!({"path": "a.txt"})),
        text("The talker ran out of tokens."),
    ])
    .await;
    let limits = SubAgentLimits {
        token_budget: Some(30),
        ..SubAgentLimits::default()
    };
    let agent = parent(&server, &repo.path(), limits);
    let outcome = agent
        .session(repo.path())
        .unwrap()
        .run("Run the talker")
        .await;
    assert_eq!(outcome.stop, Stop::Completed, "{}", outcome.text);
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 4, "stopped after 40 > 30 output tokens");
    let result = first_result(&bodies);
    assert!(
        result.contains(
            "error: stopped: the token budget of 30 output tokens was used up (40 written)"
        ),
        "{result}"
    );
}

#[tokio::test]
async fn a_sub_agent_is_refused_what_its_parent_may_not_do() {
    let repo = TempRepo::new();
    repo.write("build/out.txt", "keep me\n");
    write_agent(&repo.path(), "cleaner", "description: Cleans", "You clean.");
    let server = server(&[
        call(
            "toolu_1",
            "spawn_agent",
            json!({"agent": "cleaner", "task": "Clean"}),
        ),
        call(
            "toolu_s1",
            "run_command",
            json!({"command": "rm -rf build"}),
        ),
        text("I was not allowed to delete build."),
        text("The cleaner could not clean."),
    ])
    .await;
    let agent = parent(&server, &repo.path(), SubAgentLimits::default());
    let outcome = agent.session(repo.path()).unwrap().run("Clean up").await;
    assert_eq!(outcome.stop, Stop::Completed, "{}", outcome.text);
    assert_eq!(repo.read("build/out.txt"), "keep me\n");
    let bodies = request_bodies(&server).await;
    let denial = &bodies[2]["messages"][2]["content"][0];
    assert_eq!(denial["is_error"], true);
    assert!(
        denial["content"].as_str().unwrap().starts_with("denied: "),
        "{denial}"
    );
}

#[tokio::test]
async fn sub_agents_spawn_no_sub_agents_unless_the_depth_allows() {
    let repo = TempRepo::new();
    write_agent(&repo.path(), "lead", "description: Leads", "You lead.");
    for (depth_limit, expect_spawn) in [(1, false), (2, true)] {
        let server = server(&[
            call(
                "toolu_1",
                "spawn_agent",
                json!({"agent": "lead", "task": "Go"}),
            ),
            text("Led."),
            text("Done."),
        ])
        .await;
        let limits = SubAgentLimits {
            depth_limit,
            ..SubAgentLimits::default()
        };
        let agent = parent(&server, &repo.path(), limits);
        agent.session(repo.path()).unwrap().run("Lead").await;
        let bodies = request_bodies(&server).await;
        let names = tool_names(&bodies[1]);
        assert_eq!(
            names.contains(&"spawn_agent".to_owned()),
            expect_spawn,
            "{names:?}"
        );
        assert!(!names.contains(&"run_team".to_owned()), "{names:?}");
    }
}

#[tokio::test]
async fn a_team_passes_each_output_on_and_reports_a_missing_agent() {
    let repo = TempRepo::new();
    write_agent(&repo.path(), "planner", "description: Plans", "You plan.");
    write_agent(&repo.path(), "writer", "description: Writes", "You write.");
    std::fs::create_dir_all(repo.path().join(".keel/teams")).unwrap();
    std::fs::write(
        repo.path().join(".keel/teams/ship.yaml"),
        "name: ship\ndescription: Plans then writes\nagents: [planner, ghost, writer]\n",
    )
    .unwrap();
    let server = server(&[
        call(
            "toolu_1",
            "run_team",
            json!({"team": "ship", "task": "Add a --verbose flag"}),
        ),
        text("PLAN: parse the flag, then log."),
        text("WROTE: the flag."),
        text("The team shipped it."),
    ])
    .await;
    let agent = parent(&server, &repo.path(), SubAgentLimits::default());
    let outcome = agent.session(repo.path()).unwrap().run("Ship it").await;
    assert_eq!(outcome.stop, Stop::Completed, "{}", outcome.text);
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 4);
    assert_eq!(
        bodies[2]["messages"][0]["content"][0]["text"],
        "Add a --verbose flag\n\n## Output of the previous agent (planner)\n\nPLAN: parse the flag, then log."
    );
    assert_eq!(
        bodies[2]["system"][0]["text"]
            .as_str()
            .unwrap_or_else(|| bodies[2]["system"].as_str().unwrap()),
        "You write."
    );
    let result = first_result(&bodies);
    assert_eq!(
        result,
        "WROTE: the flag.\n\n[team ship]\n\
         - planner: 1 step, 20 output tokens\n\
         - ghost: error: no agent named `ghost`; known: planner, writer\n\
         - writer: 1 step, 20 output tokens"
    );
}

#[test]
fn malformed_definitions_are_skipped_with_warnings_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join(".keel/agents");
    std::fs::create_dir_all(agents.join("drafts")).unwrap();
    std::fs::write(
        agents.join("good.md"),
        "---\r\ndescription: Good\r\ntools: Read, Grep\r\n---\r\nBe good.\r\n",
    )
    .unwrap();
    std::fs::write(agents.join("nofront.md"), "Just text\n").unwrap();
    std::fs::write(
        agents.join("badyaml.md"),
        "---\ndescription: [x\n---\nBody\n",
    )
    .unwrap();
    std::fs::write(agents.join("empty.md"), "---\ndescription: Empty\n---\n").unwrap();
    std::fs::write(agents.join("README.md"), "# Agents\n").unwrap();
    std::fs::write(
        agents.join("drafts/wip.md"),
        "---\ndescription: WIP\n---\nNot yet.\n",
    )
    .unwrap();
    let teams = dir.path().join(".keel/teams");
    std::fs::create_dir_all(&teams).unwrap();
    std::fs::write(teams.join("t.yml"), "agents: [good]\n").unwrap();
    std::fs::write(teams.join("bad.yaml"), "agents: []\n").unwrap();
    std::fs::write(teams.join("typo.yaml"), "agent: [good]\n").unwrap();

    let (found, warnings) =
        AgentDefinitions::discover(&AgentDefinitions::standard_dirs(dir.path(), None));
    let names: Vec<&str> = found.all().iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["good"]);
    let good = found.get("good").unwrap();
    assert_eq!(
        good.tools,
        Some(vec!["read_file".to_owned(), "grep".to_owned()])
    );
    assert_eq!(good.system_prompt, "Be good.");
    let warnings = warnings
        .join("\n")
        .replace(&dir.path().display().to_string(), "[dir]");
    insta::assert_snapshot!(warnings, @r"
    agent skipped: [dir]/.keel/agents/badyaml.md: front matter: description: invalid type: sequence, expected a string at line 1 column 14
    agent skipped: [dir]/.keel/agents/empty.md: the body (the agent's system prompt) is empty
    agent skipped: [dir]/.keel/agents/nofront.md: no front matter: start the file with `---`, `description: ...`, `---`
    ");
    let (found, warnings) =
        TeamDefinitions::discover(&TeamDefinitions::standard_dirs(dir.path(), None));
    assert_eq!(found.all().len(), 1);
    assert_eq!(found.get("t").unwrap().agents, ["good"]);
    let warnings = warnings
        .join("\n")
        .replace(&dir.path().display().to_string(), "[dir]");
    assert!(
        warnings.contains("[dir]/.keel/teams/bad.yaml: `agents` is empty"),
        "{warnings}"
    );
    assert!(
        warnings.contains("[dir]/.keel/teams/typo.yaml: unknown field `agent`"),
        "{warnings}"
    );
}

#[test]
fn agents_and_teams_linked_from_outside_their_folder_are_skipped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let agents = dir.path().join(".keel/agents");
    let teams = dir.path().join(".keel/teams");
    std::fs::create_dir_all(agents.join("shared")).unwrap();
    std::fs::create_dir_all(&teams).unwrap();
    // Files elsewhere that would make good definitions...
    let secret_agent = outside.path().join("secret.md");
    std::fs::write(
        &secret_agent,
        "---\ndescription: Secret\n---\nSECRET PROMPT\n",
    )
    .unwrap();
    let secret_team = outside.path().join("secret.yaml");
    std::fs::write(&secret_team, "agents: [good]\n").unwrap();
    // ...linked into the folders, absolute and relative.
    std::os::unix::fs::symlink(&secret_agent, agents.join("evil.md")).unwrap();
    let up = "../".repeat(agents.components().count());
    std::os::unix::fs::symlink(
        format!("{up}{}", secret_agent.display()),
        agents.join("relative.md"),
    )
    .unwrap();
    std::os::unix::fs::symlink(&secret_team, teams.join("evil.yaml")).unwrap();
    // A link to a file inside the folder is fine.
    std::fs::write(
        agents.join("good.md"),
        "---\ndescription: Good\n---\nBe good.\n",
    )
    .unwrap();
    std::fs::write(
        agents.join("shared/base.md"),
        "---\nname: alias\ndescription: Alias\n---\nShared.\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("shared/base.md", agents.join("alias.md")).unwrap();
    std::fs::write(teams.join("base.yml"), "name: t\nagents: [good]\n").unwrap();
    std::os::unix::fs::symlink("base.yml", teams.join("alias.yaml")).unwrap();

    let (found, warnings) =
        AgentDefinitions::discover(&AgentDefinitions::standard_dirs(dir.path(), None));
    let names: Vec<&str> = found.all().iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["alias", "good"]);
    assert!(
        found
            .all()
            .iter()
            .all(|a| a.system_prompt != "SECRET PROMPT")
    );
    let secret = secret_agent.canonicalize().unwrap();
    let skipped = |link: &str| {
        format!(
            "agent skipped: {}: it is a symlink to {}, outside {}; definitions must lie inside \
             their folder",
            agents.join(link).display(),
            secret.display(),
            agents.display()
        )
    };
    assert_eq!(warnings, [skipped("evil.md"), skipped("relative.md")]);

    let (found, warnings) =
        TeamDefinitions::discover(&TeamDefinitions::standard_dirs(dir.path(), None));
    let names: Vec<&str> = found.all().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["t"]);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].starts_with("team `t` in "),
        "the inside link is read (and shadowed): {warnings:?}"
    );
    assert_eq!(
        warnings[1],
        format!(
            "team skipped: {}: it is a symlink to {}, outside {}; definitions must lie inside \
             their folder",
            teams.join("evil.yaml").display(),
            secret_team.canonicalize().unwrap().display(),
            teams.display()
        )
    );
}

/// Answers the parent from a script and every sub-agent after a pause, counting how many
/// sub-agent requests are in flight at once.
struct CountingModel {
    parent: std::sync::Mutex<std::collections::VecDeque<ToolUseResponse>>,
    in_flight: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
    /// Each sub-agent request waits (up to 5 s) for this many to be in flight, so that the
    /// overlap does not depend on the machine's speed.
    target: usize,
}

#[async_trait::async_trait]
impl keel_provider::Provider for CountingModel {
    fn name(&self) -> &str {
        "counting"
    }

    fn stream(
        &self,
        req: &keel_provider::CompletionRequest,
    ) -> futures::stream::BoxStream<
        '_,
        Result<keel_provider::StreamEvent, keel_provider::ProviderError>,
    > {
        use std::sync::atomic::Ordering::SeqCst;
        let is_sub = req.system.as_deref() == Some("You wait.");
        let next = if is_sub {
            text("waited")
        } else {
            self.parent.lock().unwrap().pop_front().unwrap()
        };
        let events = keel_test_support::scripted::reply_events(&next);
        Box::pin(async_stream::stream! {
            if is_sub {
                let now = self.in_flight.fetch_add(1, SeqCst) + 1;
                self.most.fetch_max(now, SeqCst);
                let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
                while self.in_flight.load(SeqCst) < self.target
                    && tokio::time::Instant::now() < deadline
                {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
                // Let the others see the peak before leaving.
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                self.in_flight.fetch_sub(1, SeqCst);
            }
            for event in events {
                yield Ok(event);
            }
        })
    }
}

#[tokio::test]
async fn spawns_in_one_turn_run_together_up_to_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    write_agent(dir.path(), "waiter", "description: Waits", "You wait.");
    for (concurrency, expected) in [(4, 3), (2, 2), (1, 1)] {
        let spawns = (1..=3)
            .map(|i| {
                ContentBlock::tool_use(
                    format!("toolu_{i}"),
                    "spawn_agent",
                    json!({"agent": "waiter", "task": format!("wait {i}")}),
                )
            })
            .collect();
        let model = Arc::new(CountingModel {
            parent: std::sync::Mutex::new(
                [
                    {
                        let mut spawning = reply(spawns, StopReason::ToolUse);
                        spawning.usage = REPLY_USAGE;
                        spawning
                    },
                    text("all waited"),
                ]
                .into(),
            ),
            in_flight: 0.into(),
            most: 0.into(),
            target: expected,
        });
        let delegation = Delegation::new(
            model.clone(),
            Models::new("m", "m"),
            Policies::new(SandboxPolicy::default()),
        );
        let base = default_tools(
            &PathSandbox::new(dir.path()).unwrap(),
            &SandboxPolicy::default(),
        )
        .unwrap();
        let (agents, _) =
            AgentDefinitions::discover(&AgentDefinitions::standard_dirs(dir.path(), None));
        let limits = SubAgentLimits {
            concurrency,
            ..SubAgentLimits::default()
        };
        let runner = Arc::new(SubAgentRunner::new(
            delegation,
            Arc::new(agents),
            base.clone(),
            limits,
        ));
        let agent = Agent::builder(model.clone())
            .model("m")
            .tools(base.with(SpawnAgentTool::new(runner)).unwrap())
            .build()
            .unwrap();
        let mut session = agent.session(dir.path()).unwrap();
        let outcome = session.run("Wait three times").await;
        assert_eq!(outcome.stop, Stop::Completed, "{}", outcome.text);
        assert_eq!(
            model.most.load(std::sync::atomic::Ordering::SeqCst),
            expected,
            "concurrency {concurrency}"
        );
        let results = keel_test_support::scripted::tool_results(session.history());
        assert_eq!(results.len(), 3);
        assert!(
            results
                .iter()
                .all(|(text, is_error)| !is_error && text.starts_with("waited")),
            "{results:?}"
        );
    }
}
