//! Sub-agents: named agents defined in Markdown files, and the `spawn_agent` tool that runs
//! one on a task with only that task as its history, narrowed tools, a step cap and a token
//! budget, under the parent's approver and sandbox.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_tool::{Effect, RegistryError, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::delegation::Delegation;
use crate::error::AgentsError;
use crate::frontmatter;
use crate::run::{RunReport, run_to_end};

/// The tool every sub-agent has, whatever its list says.
const ALWAYS: &str = "read_file";

/// A sub-agent as defined in `<dir>/<name>.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDefinition {
    /// Its name (front matter `name`, else the file's name).
    pub name: String,
    /// What it is for; shown to the model choosing one.
    pub description: String,
    /// The tools it may use (`None`: all of its parent's); `read_file` is always added.
    pub tools: Option<Vec<String>>,
    /// A tier (`fast`, `default`, `strong`) or a model name; `None`: `default`.
    pub model: Option<String>,
    /// Its step cap, if it sets its own.
    pub max_steps: Option<u32>,
    /// The body of the file: its system prompt.
    pub system_prompt: String,
    /// The file it came from.
    pub path: PathBuf,
}

/// A tool list written as a YAML list or, as Claude Code writes them, `Read, Grep, Glob`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ToolList {
    List(Vec<String>),
    Text(String),
}

#[derive(Debug, Deserialize)]
struct AgentFront {
    name: Option<String>,
    description: String,
    tools: Option<ToolList>,
    model: Option<String>,
    max_steps: Option<u32>,
}

/// keel's tool for Claude Code's tool `name` (`Read` is `read_file`, `Edit` and `MultiEdit`
/// are `patch_file`, `Bash` is `run_command`, `Task` is `spawn_agent`, ...); `None` for a name
/// that is not one of Claude Code's tools keel has.
pub fn keel_tool_for_claude(name: &str) -> Option<&'static str> {
    Some(match name.trim() {
        "Read" => "read_file",
        "Write" => "write_file",
        "Edit" | "MultiEdit" => "patch_file",
        "Grep" => "grep",
        "Glob" => "glob",
        "LS" => "list_directory",
        "Bash" => "run_command",
        "Task" => "spawn_agent",
        _ => return None,
    })
}

/// Claude Code's tool names, as `.claude/agents` files use them, in keel's words; other
/// names as they are.
fn keel_tool_name(name: &str) -> String {
    keel_tool_for_claude(name).map_or_else(|| name.trim().to_owned(), str::to_owned)
}

impl AgentDefinition {
    /// Reads one definition file.
    pub fn load(path: &Path) -> Result<Self, AgentsError> {
        let text = std::fs::read_to_string(path).map_err(|err| AgentsError::io(path, err))?;
        let invalid = |reason: &str| AgentsError::Invalid {
            path: path.to_path_buf(),
            reason: reason.to_owned(),
        };
        let document = frontmatter::parse::<AgentFront>(path, &text)?;
        let front = document.front.ok_or_else(|| {
            invalid("no front matter: start the file with `---`, `description: ...`, `---`")
        })?;
        let name = front
            .name
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| frontmatter::stem(path));
        if front.description.trim().is_empty() {
            return Err(invalid("`description` is empty: say what the agent is for"));
        }
        if front.max_steps == Some(0) {
            return Err(invalid("`max_steps` must be at least 1"));
        }
        if document.body.is_empty() {
            return Err(invalid("the body (the agent's system prompt) is empty"));
        }
        let tools = front.tools.map(|list| match list {
            ToolList::List(names) => names.iter().map(|n| keel_tool_name(n)).collect(),
            ToolList::Text(text) => text
                .split(',')
                .filter(|n| !n.trim().is_empty())
                .map(keel_tool_name)
                .collect(),
        });
        Ok(Self {
            name: name.trim().to_owned(),
            description: front.description.trim().to_owned(),
            tools,
            model: front.model.filter(|m| !m.trim().is_empty()),
            max_steps: front.max_steps,
            system_prompt: document.body,
            path: path.to_path_buf(),
        })
    }
}

impl AgentDefinition {
    /// A sub-agent as Claude Code's `--agents` JSON (and the Agent SDKs' `agents` option)
    /// defines one: `{"description": …, "prompt": …, "tools": ["Read", …], "model":
    /// "sonnet"|"opus"|"haiku"|"inherit"|<id>}`. Tools are taken as in `.claude/agents`
    /// files; `inherit` (or no model) is the default tier. `origin` says where it came from
    /// (in messages, as a file's path would).
    pub fn from_claude_json(
        name: &str,
        definition: &serde_json::Value,
        origin: &str,
    ) -> Result<Self, AgentsError> {
        let invalid = |reason: String| AgentsError::Invalid {
            path: PathBuf::from(origin),
            reason: format!("agent {name:?}: {reason}"),
        };
        let text = |key: &str| {
            definition
                .get(key)
                .and_then(serde_json::Value::as_str)
                .map(str::trim)
                .filter(|text| !text.is_empty())
        };
        if name.trim().is_empty() {
            return Err(invalid("the name is empty".to_owned()));
        }
        let description = text("description")
            .ok_or_else(|| invalid("`description` is missing: say what the agent is for".into()))?;
        let prompt = text("prompt")
            .ok_or_else(|| invalid("`prompt` (the agent's system prompt) is missing".into()))?;
        let tools = match definition.get("tools") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::Array(names)) => Some(
                names
                    .iter()
                    .map(|name| {
                        name.as_str()
                            .map(keel_tool_name)
                            .ok_or_else(|| invalid("`tools` must be a list of names".into()))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            Some(_) => return Err(invalid("`tools` must be a list of names".into())),
        };
        Ok(Self {
            name: name.trim().to_owned(),
            description: description.to_owned(),
            tools,
            model: text("model")
                .filter(|model| *model != "inherit")
                .map(str::to_owned),
            max_steps: None,
            system_prompt: prompt.to_owned(),
            path: PathBuf::from(origin),
        })
    }
}

/// The sub-agents a project and its user define.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentDefinitions {
    agents: Vec<AgentDefinition>,
}

impl AgentDefinitions {
    /// Where definitions are looked for, first wins: the project's `.keel/agents` and
    /// `.claude/agents`, then `$KEEL_HOME/agents`.
    pub fn standard_dirs(project_root: &Path, keel_home: Option<&Path>) -> Vec<PathBuf> {
        let mut dirs = frontmatter::project_dirs(project_root, &[".keel/agents", ".claude/agents"]);
        dirs.extend(keel_home.map(|home| home.join("agents")));
        dirs
    }

    /// Reads every `<dir>/<name>.md` (not `drafts/`, not README and the like). A file that
    /// cannot be used, or is a symlink to a file outside `<dir>`, is skipped with a warning
    /// naming it and the problem; a name defined twice keeps the first.
    pub fn discover(dirs: &[PathBuf]) -> (Self, Vec<String>) {
        let mut agents: Vec<AgentDefinition> = Vec::new();
        let mut warnings = Vec::new();
        for dir in dirs {
            let files = match frontmatter::markdown_files(dir) {
                Ok(files) => files,
                Err(err) => {
                    warnings.push(format!("agents skipped: {err}"));
                    continue;
                }
            };
            for file in files {
                let loaded = frontmatter::check_inside(dir, &file)
                    .and_then(|()| AgentDefinition::load(&file));
                match loaded {
                    Ok(agent) => match agents.iter().find(|a| a.name == agent.name) {
                        Some(first) => warnings.push(format!(
                            "agent `{}` in {} skipped: {} defines it first",
                            agent.name,
                            file.display(),
                            first.path.display()
                        )),
                        None => agents.push(agent),
                    },
                    Err(err) => warnings.push(format!("agent skipped: {err}")),
                }
            }
        }
        for warning in &warnings {
            tracing::warn!("{warning}");
        }
        agents.sort_by(|a, b| a.name.cmp(&b.name));
        (Self { agents }, warnings)
    }

    /// These definitions with `more` added; one of `more` replaces one of the same name.
    pub fn with(mut self, more: Vec<AgentDefinition>) -> Self {
        self.agents
            .retain(|agent| !more.iter().any(|added| added.name == agent.name));
        self.agents.extend(more);
        self.agents.sort_by(|a, b| a.name.cmp(&b.name));
        self
    }

    /// Definitions from a list (for hosts that define agents in code).
    pub fn from_definitions(mut agents: Vec<AgentDefinition>) -> Self {
        agents.sort_by(|a, b| a.name.cmp(&b.name));
        agents.dedup_by(|b, a| a.name == b.name);
        Self { agents }
    }

    /// The agent named `name`.
    pub fn get(&self, name: &str) -> Option<&AgentDefinition> {
        self.agents.iter().find(|a| a.name == name)
    }

    /// Every agent, by name.
    pub fn all(&self) -> &[AgentDefinition] {
        &self.agents
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }

    pub(crate) fn not_found(&self, name: &str) -> AgentsError {
        AgentsError::not_found("agent", name, self.agents.iter().map(|a| a.name.as_str()))
    }
}

/// How far sub-agents may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubAgentLimits {
    /// How deep sub-agents may nest: 1 means the main agent spawns sub-agents and they spawn
    /// none (default 1).
    pub depth_limit: u32,
    /// Model calls per sub-agent run, unless its definition sets `max_steps` (default 15).
    pub max_steps: u32,
    /// Output tokens per sub-agent run; `None`: min(8000, 30 % of the model's context
    /// window), 8000 for a model the catalog does not know.
    pub token_budget: Option<u64>,
    /// Sub-agents running at once (default 4).
    pub concurrency: usize,
}

impl Default for SubAgentLimits {
    fn default() -> Self {
        Self {
            depth_limit: 1,
            max_steps: 15,
            token_budget: None,
            concurrency: 4,
        }
    }
}

/// Tools some sub-agents get besides those narrowed from their parent's, by agent name: `None`
/// (or an empty registry) for an agent that gets none. keel-tasks' `task_tools_for` gives the
/// background-task tools to the agents allowed to start tasks this way.
pub type ExtraTools =
    Arc<dyn Fn(&str) -> Result<Option<ToolRegistry>, RegistryError> + Send + Sync>;

/// [`ExtraTools`], shown by `Debug` as what it is.
#[derive(Clone)]
struct ExtraToolsSlot(ExtraTools);

impl std::fmt::Debug for ExtraToolsSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExtraTools(..)")
    }
}

/// Runs sub-agents: shared by `spawn_agent`, `run_team` and hosts that call it directly.
#[derive(Debug)]
pub struct SubAgentRunner {
    delegation: Delegation,
    definitions: Arc<AgentDefinitions>,
    /// The tools of the agent that owns this runner (no delegation tools among them).
    parent_tools: ToolRegistry,
    limits: SubAgentLimits,
    /// The depth of the agent that owns this runner: 0 for the main agent.
    depth: u32,
    slots: Arc<Semaphore>,
    /// Tools added to some sub-agents' (background tasks, for those allowed them).
    extra_tools: Option<ExtraToolsSlot>,
}

impl SubAgentRunner {
    /// A runner for the main agent whose tools are `parent_tools`.
    pub fn new(
        delegation: Delegation,
        definitions: Arc<AgentDefinitions>,
        parent_tools: ToolRegistry,
        limits: SubAgentLimits,
    ) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(limits.concurrency.max(1))),
            delegation,
            definitions,
            parent_tools,
            limits,
            depth: 0,
            extra_tools: None,
        }
    }

    /// Gives sub-agents the tools `extra` returns for their name, besides those narrowed
    /// from their parent's (by default they get none: e.g. only the main agent may start
    /// background tasks). Sub-agents they spawn are asked by their own names too.
    pub fn with_extra_tools(mut self, extra: ExtraTools) -> Self {
        self.extra_tools = Some(ExtraToolsSlot(extra));
        self
    }

    /// The definitions.
    pub fn definitions(&self) -> &AgentDefinitions {
        &self.definitions
    }

    /// The tools agent `definition` gets: its list (or all the parent's) with `read_file`,
    /// intersected with the parent's; plus `spawn_agent` one level down when depth allows.
    pub fn tools_for(&self, definition: &AgentDefinition) -> Result<ToolRegistry, AgentsError> {
        let mut registry = match &definition.tools {
            Some(names) => {
                let mut names: Vec<&str> = names.iter().map(String::as_str).collect();
                names.push(ALWAYS);
                self.parent_tools.subset(&names)
            }
            None => self.parent_tools.clone(),
        };
        let wants_spawn = definition
            .tools
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == SpawnAgentTool::NAME));
        if self.depth + 1 < self.limits.depth_limit && wants_spawn {
            let child = Self {
                delegation: self.delegation.clone(),
                definitions: self.definitions.clone(),
                parent_tools: registry.clone(),
                limits: self.limits,
                depth: self.depth + 1,
                slots: self.slots.clone(),
                extra_tools: self.extra_tools.clone(),
            };
            registry.register(SpawnAgentTool::new(Arc::new(child)))?;
        }
        if let Some(ExtraToolsSlot(extra)) = &self.extra_tools
            && let Some(tools) = extra(&definition.name)?
        {
            for name in tools.names() {
                if let Some(tool) = tools.get(name) {
                    registry.register_dyn(tool)?;
                }
            }
        }
        Ok(registry)
    }

    /// The output-token budget of a run on `model`.
    pub fn token_budget(&self, model: &str) -> u64 {
        self.limits.token_budget.unwrap_or_else(|| {
            self.delegation
                .context_window(model)
                .map_or(8000, |window| (window * 3 / 10).min(8000))
        })
    }

    /// Runs agent `name` on `task` in `cwd`: only the task as history, its tools, its model,
    /// its step cap and the token budget. Fails only when there is no such agent or its
    /// agent cannot be built; everything that happens in the run is in the report.
    pub async fn run(
        &self,
        name: &str,
        task: &str,
        cwd: &Path,
        cancel: &CancellationToken,
    ) -> Result<RunReport, AgentsError> {
        let definition = self
            .definitions
            .get(name)
            .ok_or_else(|| self.definitions.not_found(name))?;
        let model = self
            .delegation
            .models()
            .resolve(definition.model.as_deref().unwrap_or("default"));
        let agent = self
            .delegation
            .agent_builder(&model)
            .tools(self.tools_for(definition)?)
            .system_prompt(definition.system_prompt.clone())
            .max_iterations(definition.max_steps.unwrap_or(self.limits.max_steps))
            .output_token_budget(self.token_budget(&model))
            .build()?;
        let span = tracing::info_span!("sub_agent", agent = name, %model, depth = self.depth + 1);
        async {
            // Wait for a slot, unless cancelled first.
            let _slot = tokio::select! {
                biased;
                () = cancel.cancelled() => None,
                slot = self.slots.acquire() => slot.ok(),
            };
            let mut session = agent.session(cwd)?;
            // Its stops fire SubagentStop hooks, not Stop.
            session.set_subagent(name);
            Ok::<_, AgentsError>(run_to_end(&mut session, task, cancel).await)
        }
        .instrument(span)
        .await
    }
}

/// `{output, steps, tokens, error?}` as the calling model reads it.
pub fn render_report(agent: &str, report: &RunReport) -> String {
    format!(
        "{}\n\n[agent {agent}: {}]",
        report.output.trim(),
        report.stats()
    )
}

/// `spawn_agent` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SpawnAgentArgs {
    /// The agent's name, as listed in this tool's description.
    pub agent: String,
    /// Everything the agent needs to know: it sees only this, not the conversation.
    pub task: String,
}

/// `spawn_agent { agent, task }`: runs a sub-agent and returns what it did.
#[derive(Debug)]
pub struct SpawnAgentTool {
    runner: Arc<SubAgentRunner>,
    description: String,
}

impl SpawnAgentTool {
    /// The tool over `runner`; its description lists the runner's agents.
    pub fn new(runner: Arc<SubAgentRunner>) -> Self {
        let mut description = String::from(
            "Runs a sub-agent on a task and returns its final answer with the steps and tokens \
             it used. The sub-agent starts fresh: it sees only the task (not this \
             conversation), so put everything it needs in it. Several calls in one turn run \
             at the same time. Available agents:",
        );
        if runner.definitions.is_empty() {
            description.push_str(" none are defined.");
        }
        for agent in runner.definitions.all() {
            description.push_str(&format!("\n- {}: {}", agent.name, agent.description));
        }
        Self {
            runner,
            description,
        }
    }
}

impl Tool for SpawnAgentTool {
    type Args = SpawnAgentArgs;
    const NAME: &'static str = "spawn_agent";

    fn description(&self) -> &str {
        &self.description
    }

    /// Spawning does nothing by itself; every call the sub-agent makes is checked and
    /// approved as the parent's would be. So several spawns in a turn may run together.
    fn effect(&self, _args: &SpawnAgentArgs) -> Effect {
        Effect::ReadOnly
    }

    async fn call(&self, args: SpawnAgentArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if args.task.trim().is_empty() {
            return Err(ToolError::failed(
                "the task is empty: say what the agent should do",
            ));
        }
        let report = self
            .runner
            .run(&args.agent, &args.task, ctx.cwd(), ctx.cancel())
            .await
            .map_err(|err| ToolError::failed(err.to_string()))?;
        Ok(ToolOutput::text(render_report(&args.agent, &report)))
    }
}
