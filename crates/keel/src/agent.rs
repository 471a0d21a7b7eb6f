//! [`CodingAgent`]: the built agent, its sessions, and runs that wait for their background
//! tasks.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::{Stream, StreamExt as _};
use keel_agents::Policies;
use keel_engine::{Agent, AgentEvent, RunOutcome, Session};
use keel_provider::Provider;

use crate::delegates::Delegates;
use crate::profile::{ContextOverflow, ContextWindow, ProfileChoice, ToolProfile};
use crate::{BuildError, CodingAgentBuilder};

/// The prompt of the turn after the background tasks a run started have ended.
pub const TASKS_ENDED_PROMPT: &str = "The background tasks you started have ended; their \
notifications are above. Check their results and finish the request.";

/// The whole keel agent: default tools in a sandbox, the system prompt with the project's
/// context, delegation, skills, background tasks, snapshots, and one set of [`Policies`] that
/// every delegated run takes.
pub struct CodingAgent {
    parts: Parts,
}

/// What the builder made.
pub(crate) struct Parts {
    pub(crate) agent: Agent,
    pub(crate) cwd: PathBuf,
    pub(crate) home: PathBuf,
    pub(crate) model: String,
    pub(crate) policies: Policies,
    pub(crate) paths: keel_sandbox::PathSandbox,
    pub(crate) delegates: Option<Arc<Delegates>>,
    pub(crate) warnings: Vec<String>,
    pub(crate) memory: keel_engine::MemoryReport,
    #[cfg(feature = "snapshots")]
    pub(crate) snapshots: Option<Arc<keel_snapshot::ShadowSnapshots>>,
    pub(crate) tool_profile: ToolProfile,
    pub(crate) profile_choice: ProfileChoice,
    pub(crate) window: Option<ContextWindow>,
    /// The first request's estimated tokens before the prompt: system prompt and tools.
    pub(crate) base_tokens: u64,
}

impl std::fmt::Debug for CodingAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodingAgent")
            .field("model", &self.parts.model)
            .field("cwd", &self.parts.cwd)
            .field("tools", &self.parts.agent.tools().names())
            .finish_non_exhaustive()
    }
}

/// What a [`CodingAgent::run`] reports as it goes. `Clone`, so a host can hand each event to
/// several subscribers.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum RunEvent {
    /// Something happened in a run (the first, or the one after the tasks ended). Each run
    /// ends with its own [`AgentEvent::Finished`].
    Agent(AgentEvent),
    /// The run completed with background tasks still running: waiting for them.
    WaitingForTasks {
        /// The tasks' ids.
        ids: Vec<String>,
    },
    /// The tasks ended; the model is asked to check their results ([`TASKS_ENDED_PROMPT`]).
    TasksEnded,
    /// The last event: the outcome of the whole request (iterations, usage and cost summed
    /// over both runs).
    Done(RunOutcome),
}

impl CodingAgent {
    /// A builder for the agent on `provider`.
    pub fn builder(provider: Arc<dyn Provider>) -> CodingAgentBuilder {
        CodingAgentBuilder::new(provider)
    }

    /// The agent `keel exec` would run here with no flags and no config file: the provider
    /// the environment names (keel-provider's one detection, [`keel_provider::from_env`]:
    /// `ANTHROPIC_API_KEY`, else `OPENAI_BASE_URL` / `OPENAI_API_KEY`, or `KEEL_PROVIDER`),
    /// the current directory, keel's home from [`home_dir`](crate::home_dir), and the
    /// builder's defaults for the rest. No provider configured is
    /// [`BuildError::Provider`], whose message says which variable to set.
    ///
    /// ```no_run
    /// # async fn host() -> Result<(), Box<dyn std::error::Error>> {
    /// let outcome = keel::CodingAgent::from_env()?.prompt("Fix the failing test").await?;
    /// println!("{}", outcome.text);
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_env() -> Result<Self, BuildError> {
        Self::builder(keel_provider::from_env()?).build()
    }

    /// [`from_env`](Self::from_env) with the variables `lookup` gives instead of the
    /// process's (a host's own settings, a test's): the provider's (as
    /// [`ProviderConfig::detect_with`](keel_provider::ProviderConfig::detect_with) reads
    /// them), `KEEL_HOME` and `HOME` for keel's home ([`home_dir_from`](crate::home_dir_from))
    /// and `HOME` for the user's. The working directory is still the current one.
    pub fn from_env_with(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, BuildError> {
        let provider = keel_provider::ProviderConfig::detect_with(&lookup)?
            .build_with(&lookup)?
            .provider;
        let keel_home = lookup("KEEL_HOME");
        let user_home = lookup("HOME").filter(|home| !home.is_empty());
        let home = crate::home_dir_from(
            keel_home.as_deref().map(Path::new),
            user_home.as_deref().map(Path::new),
        )?;
        let builder = Self::builder(provider).home(home);
        match user_home {
            Some(user_home) => builder.user_home(user_home),
            None => builder,
        }
        .build()
    }

    pub(crate) fn new(parts: Parts) -> Self {
        Self { parts }
    }

    /// The engine's agent (its tools, model, sessions).
    pub fn agent(&self) -> &Agent {
        &self.parts.agent
    }

    /// A new session in the agent's working directory.
    pub fn session(&self) -> Result<Session, BuildError> {
        Ok(self.parts.agent.session(&self.parts.cwd)?)
    }

    /// Reopens saved session `id`.
    pub fn resume(&self, id: &str) -> Result<Session, BuildError> {
        Ok(self.parts.agent.resume(id)?)
    }

    /// Reopens the newest saved session of the working directory.
    pub fn resume_latest(&self) -> Result<Session, BuildError> {
        Ok(self.parts.agent.resume_latest(&self.parts.cwd)?)
    }

    /// The working directory (canonical).
    pub fn cwd(&self) -> &Path {
        &self.parts.cwd
    }

    /// keel's home.
    pub fn home(&self) -> &Path {
        &self.parts.home
    }

    /// The model.
    pub fn model(&self) -> &str {
        &self.parts.model
    }

    /// The policies the agent and every run it delegates keep.
    pub fn policies(&self) -> &Policies {
        &self.parts.policies
    }

    /// The file tools' path sandbox: the workspace and every root they may read (allow-read
    /// paths, writable roots, the user's skills). A host reading a path the person names
    /// (an `@file` mention, a completion) checks it here, as the tools do.
    pub fn path_sandbox(&self) -> &keel_sandbox::PathSandbox {
        &self.parts.paths
    }

    /// Sub-agents, teams, skills and tasks; `None` without delegation.
    pub fn delegates(&self) -> Option<&Arc<Delegates>> {
        self.parts.delegates.as_ref()
    }

    /// Parts left out while building, one line each (a definition file skipped, snapshots or
    /// tasks that could not be opened, keel's home where commands may write).
    pub fn warnings(&self) -> &[String] {
        &self.parts.warnings
    }

    /// The memory files the system prompt was built from (the user's, the project's, their
    /// `@` imports) and the ones skipped, with why: what a REPL's `/memory` lists (its
    /// `Display` is that listing). The refusals among the skipped are in
    /// [`warnings`](Self::warnings) too. Empty when
    /// [`CodingAgentBuilder::system_prompt`] replaced keel's prompt (and with it the files).
    pub fn memory(&self) -> &keel_engine::MemoryReport {
        &self.parts.memory
    }

    /// The tool profile the agent was built with.
    pub fn tool_profile(&self) -> ToolProfile {
        self.parts.tool_profile
    }

    /// How the tool profile was chosen: given, or lean for a small window (a host says so in
    /// a line), or full by default.
    pub fn profile_choice(&self) -> ProfileChoice {
        self.parts.profile_choice
    }

    /// The model's context window, the smallest known (configured or the catalog's, and the
    /// server's); `None` when none is known.
    pub fn context_window(&self) -> Option<ContextWindow> {
        self.parts.window
    }

    /// The estimated tokens of a new session's first request with `prompt`: the system
    /// prompt, every tool's definition (MCP servers' as they are now) and the prompt, at 4
    /// bytes a token as compaction estimates.
    pub fn first_request_tokens(&self, prompt: &str) -> u64 {
        let message = [keel_provider::Message::user(prompt)];
        self.parts
            .base_tokens
            .saturating_add(keel_engine::compaction::messages_tokens(&message))
    }

    /// The first request with `prompt` and the window it exceeds, when it is estimated larger
    /// than the model's known [`context_window`](Self::context_window): a server would cut
    /// it or refuse it. `None` when it fits or no window is known.
    pub fn context_overflow(&self, prompt: &str) -> Option<ContextOverflow> {
        let window = self.parts.window?;
        let estimate = self.first_request_tokens(prompt);
        (estimate > window.tokens).then_some(ContextOverflow { estimate, window })
    }

    /// The workspace's snapshots, when on.
    #[cfg(feature = "snapshots")]
    pub fn snapshots(&self) -> Option<&Arc<keel_snapshot::ShadowSnapshots>> {
        self.parts.snapshots.as_ref()
    }

    /// The background tasks, when on.
    #[cfg(feature = "tasks")]
    pub fn tasks(&self) -> Option<&crate::background::TaskLauncher> {
        self.delegates().and_then(|d| d.tasks())
    }

    /// Runs `prompt` in `session`, as `keel exec` does: when the run completes with
    /// background tasks it started still running, waits for them to end
    /// ([`RunEvent::WaitingForTasks`], then [`RunEvent::TasksEnded`]) and runs
    /// [`TASKS_ENDED_PROMPT`] so the model checks their results. The last event is
    /// [`RunEvent::Done`]. Dropping the stream stops it (while waiting, the tasks go on).
    /// [`run_without_waiting`](Self::run_without_waiting) ends with the first run.
    pub fn run<'a>(
        &'a self,
        session: &'a mut Session,
        prompt: &'a str,
    ) -> impl Stream<Item = RunEvent> + Send + 'a {
        self.run_content(session, vec![keel_provider::ContentBlock::text(prompt)])
    }

    /// Runs `prompt` in `session` and ends with it, leaving the background tasks it started
    /// running (`keel exec --no-wait-tasks`): their notifications reach the session's next
    /// run. The last event is [`RunEvent::Done`].
    pub fn run_without_waiting<'a>(
        &'a self,
        session: &'a mut Session,
        prompt: &'a str,
    ) -> impl Stream<Item = RunEvent> + Send + 'a {
        self.run_content_without_waiting(session, vec![keel_provider::ContentBlock::text(prompt)])
    }

    /// [`run`](Self::run) with a prompt of several blocks: text and
    /// [images](keel_provider::ContentBlock::image) the person attached.
    pub fn run_content<'a>(
        &'a self,
        session: &'a mut Session,
        prompt: Vec<keel_provider::ContentBlock>,
    ) -> impl Stream<Item = RunEvent> + Send + 'a {
        self.stream_run(session, prompt, true)
    }

    /// [`run_without_waiting`](Self::run_without_waiting) with a prompt of several blocks:
    /// text and [images](keel_provider::ContentBlock::image) the person attached.
    pub fn run_content_without_waiting<'a>(
        &'a self,
        session: &'a mut Session,
        prompt: Vec<keel_provider::ContentBlock>,
    ) -> impl Stream<Item = RunEvent> + Send + 'a {
        self.stream_run(session, prompt, false)
    }

    /// Runs `prompt` in a new session and returns its outcome (its
    /// [`text`](RunOutcome::text) is the reply), waiting for the background tasks it starts
    /// as [`run`](Self::run) does. The session is saved like any other:
    /// [`resume_latest`](Self::resume_latest) reopens it. A run that fails says so in its
    /// [`stop`](RunOutcome::stop); the error is only for a session that cannot be opened.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use keel::prelude::*;
    /// use keel_test_support::scripted::ScriptedProvider;
    ///
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let workspace = tempfile::tempdir()?;
    /// # let home = tempfile::tempdir()?;
    /// // CodingAgent::from_env()? in a host; a scripted model here.
    /// let model = Arc::new(ScriptedProvider::new().then_text("All tests pass."));
    /// let agent = CodingAgent::builder(model).cwd(workspace.path()).home(home.path()).build()?;
    /// let outcome = agent.prompt("Run the tests").await?;
    /// assert_eq!(outcome.stop, Stop::Completed);
    /// assert_eq!(outcome.text, "All tests pass.");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn prompt(&self, prompt: &str) -> Result<RunOutcome, BuildError> {
        let mut session = self.session()?;
        let events = self.run(&mut session, prompt);
        futures::pin_mut!(events);
        let mut outcome = None;
        while let Some(event) = events.next().await {
            if let RunEvent::Done(done) = event {
                outcome = Some(done);
            }
        }
        outcome.ok_or(BuildError::NoOutcome)
    }

    /// The events of a run of `prompt` in `session`, waiting for its background tasks when
    /// `wait_for_tasks` (the one implementation behind [`run`](Self::run) and
    /// [`run_without_waiting`](Self::run_without_waiting)).
    fn stream_run<'a>(
        &'a self,
        session: &'a mut Session,
        prompt: Vec<keel_provider::ContentBlock>,
        wait_for_tasks: bool,
    ) -> impl Stream<Item = RunEvent> + Send + 'a {
        async_stream::stream! {
            let mut first = None;
            {
                let events = session.run_streaming_content(prompt);
                futures::pin_mut!(events);
                while let Some(event) = events.next().await {
                    if let AgentEvent::Finished(outcome) = &event {
                        first = Some(outcome.clone());
                    }
                    yield RunEvent::Agent(event);
                }
            }
            let Some(first) = first else {
                return;
            };
            #[cfg(feature = "tasks")]
            if wait_for_tasks
                && first.stop == keel_engine::Stop::Completed
                && let Some(launcher) = self.tasks()
            {
                let mut waited = false;
                loop {
                    match active_tasks(launcher, session.id()) {
                        Ok(ids) if ids.is_empty() => break,
                        Ok(ids) => {
                            if !waited {
                                yield RunEvent::WaitingForTasks { ids };
                            }
                            waited = true;
                        }
                        Err(error) => {
                            yield RunEvent::Agent(AgentEvent::Warning {
                                message: format!("cannot read the tasks: {error}"),
                            });
                            break;
                        }
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                }
                if waited {
                    yield RunEvent::TasksEnded;
                    let mut last = None;
                    {
                        let events = session.run_streaming(TASKS_ENDED_PROMPT);
                        futures::pin_mut!(events);
                        while let Some(event) = events.next().await {
                            if let AgentEvent::Finished(outcome) = &event {
                                last = Some(outcome.clone());
                            }
                            yield RunEvent::Agent(event);
                        }
                    }
                    if let Some(last) = last {
                        yield RunEvent::Done(combine(&first, last));
                        return;
                    }
                }
            }
            #[cfg(not(feature = "tasks"))]
            let _ = wait_for_tasks;
            yield RunEvent::Done(first);
        }
    }
}

/// The ids of the tasks `session_id` started that are still running. A supervisor that died
/// would leave its task running forever, so the store is recovered first.
#[cfg(feature = "tasks")]
fn active_tasks(
    launcher: &crate::background::TaskLauncher,
    session_id: &str,
) -> Result<Vec<String>, String> {
    if let Err(err) = launcher.recover() {
        tracing::warn!("task recovery: {err}");
    }
    let active = launcher
        .store()
        .active_for_session(session_id)
        .map_err(|err| err.to_string())?;
    Ok(active.into_iter().map(|task| task.id).collect())
}

/// `last` with the iterations, usage and cost (per provider too) of `first` added.
#[cfg(feature = "tasks")]
fn combine(first: &RunOutcome, mut last: RunOutcome) -> RunOutcome {
    last.iterations += first.iterations;
    let mut usage = first.usage;
    usage.add(&last.usage);
    last.usage = usage;
    last.cost_usd = first.cost_usd.zip(last.cost_usd).map(|(a, b)| a + b);
    let mut by_provider = first.cost_by_provider.clone();
    by_provider.merge(&last.cost_by_provider);
    last.cost_by_provider = by_provider;
    last
}
