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
use crate::skills::SkillIndex;
use crate::tool_names::{self, ListKind, NameList};

/// The tool every sub-agent has, whatever its list says.
const ALWAYS: &str = "read_file";

/// A sub-agent as defined in `<dir>/<name>.md` (keel's keys or Claude Code's), or in Claude
/// Code's `--agents` JSON.
///
/// Claude Code's keys are read as Claude Code reads them: `tools` and `disallowedTools`
/// (a comma-separated text or a YAML list of Claude's tool names, keel's, or MCP tools'
/// `mcp__<server>__<tool>`), `model` (`inherit`, `sonnet`, `opus`, `haiku` or a model id),
/// `maxTurns`, `permissionMode`, `skills`. Other keys (`color`, ...) are accepted and
/// ignored. What keel cannot honour is a warning kept in [`warnings`](Self::warnings), never
/// dropped without a word.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentDefinition {
    /// Its name (front matter `name`, else the file's name).
    pub name: String,
    /// What it is for; shown to the model choosing one.
    pub description: String,
    /// The tools it may use, keel's names (`None`: all of its parent's); `read_file` is
    /// always added unless [`disallowed_tools`](Self::disallowed_tools) takes it away.
    pub tools: Option<Vec<String>>,
    /// Tools taken away from what it would get (Claude Code's `disallowedTools`), keel's
    /// names.
    pub disallowed_tools: Vec<String>,
    /// The model: `None` or `inherit`, its parent's; a tier (`fast`, `default`, `strong`);
    /// one of Claude Code's aliases (`haiku`, `sonnet`, `opus`); or a model id, used as it
    /// is. See [`Delegation::resolve_model`].
    pub model: Option<String>,
    /// Its step cap (`max_steps`, Claude Code's `maxTurns`), if it sets its own.
    pub max_steps: Option<u32>,
    /// Claude Code's `permissionMode`, as written. Only [`PermissionMode::Plan`] changes
    /// anything (it refuses every change); the others never give more than the parent has.
    pub permission_mode: Option<PermissionMode>,
    /// Skills whose instructions are put in its system prompt when it starts (Claude Code's
    /// `skills`), by name; see [`SubAgentRunner::with_skills`].
    pub skills: Vec<String>,
    /// The body of the file: its system prompt.
    pub system_prompt: String,
    /// The file it came from.
    pub path: PathBuf,
    /// What in its definition keel does not honour (a Claude tool keel has no twin of, an
    /// unknown tool name, an unknown permission mode), each naming the agent and the item.
    pub warnings: Vec<String>,
}

/// Claude Code's permission modes, as a sub-agent's `permissionMode` names them.
///
/// A sub-agent never gets more than its parent: a definition is a repository's file, and a
/// repository must not loosen the person's choices. So `bypassPermissions`, `acceptEdits`
/// and `dontAsk` are recorded and nothing more: the sub-agent's calls are approved by its
/// parent's approver under its parent's rules. `plan` tightens, and is honoured: every call
/// that may change something is refused (the sub-agent explores and reports), and so are
/// those of the sub-agents it spawns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionMode {
    /// `default`: the parent's approvals.
    Default,
    /// `acceptEdits`: recorded; the parent's approvals (never more).
    AcceptEdits,
    /// `plan`: read-only; every change refused.
    Plan,
    /// `bypassPermissions`: recorded; the parent's approvals (never more).
    BypassPermissions,
    /// `dontAsk`: recorded; the parent's approvals (never more).
    DontAsk,
}

impl PermissionMode {
    /// The mode Claude Code's `name` is (`acceptEdits`, ...), if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name.trim() {
            "default" => Self::Default,
            "acceptEdits" => Self::AcceptEdits,
            "plan" => Self::Plan,
            "bypassPermissions" => Self::BypassPermissions,
            "dontAsk" => Self::DontAsk,
            _ => return None,
        })
    }

    /// Claude Code's name of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::AcceptEdits => "acceptEdits",
            Self::Plan => "plan",
            Self::BypassPermissions => "bypassPermissions",
            Self::DontAsk => "dontAsk",
        }
    }

    /// Whether the mode refuses every change (`plan`).
    pub fn refuses_changes(self) -> bool {
        self == Self::Plan
    }
}

#[derive(Debug, Deserialize)]
struct AgentFront {
    name: Option<String>,
    description: String,
    tools: Option<NameList>,
    #[serde(rename = "disallowedTools", alias = "disallowed_tools")]
    disallowed_tools: Option<NameList>,
    model: Option<String>,
    #[serde(alias = "maxTurns")]
    max_steps: Option<u32>,
    #[serde(rename = "permissionMode", alias = "permission_mode")]
    permission_mode: Option<String>,
    skills: Option<NameList>,
}

/// keel's tool for Claude Code's tool `name` (`Read` is `read_file`, `Edit` and `MultiEdit`
/// are `patch_file`, `Bash` is `run_command`, `Task` is `spawn_agent`, ...); `None` for a name
/// that is not one of Claude Code's tools keel has. The first of
/// [`keel_tool::claude::keel_tools`], kept for callers that want one tool.
pub fn keel_tool_for_claude(name: &str) -> Option<&'static str> {
    keel_tool::claude::keel_tools(name.trim()).first().copied()
}

/// What the list parts of a definition become, with their warnings.
struct Lists {
    tools: Option<Vec<String>>,
    disallowed_tools: Vec<String>,
    permission_mode: Option<PermissionMode>,
    warnings: Vec<String>,
}

impl Lists {
    fn read(
        name: &str,
        tools: Option<&NameList>,
        disallowed: Option<&NameList>,
        permission_mode: Option<&str>,
    ) -> Self {
        let subject = format!("agent `{}`", name.trim());
        let mut warnings = Vec::new();
        let tools = tools.map(|list| {
            tool_names::keel_names(&list.names(), ListKind::Allowed, &subject, &mut warnings)
        });
        let disallowed_tools = disallowed.map_or_else(Vec::new, |list| {
            tool_names::keel_names(&list.names(), ListKind::Disallowed, &subject, &mut warnings)
        });
        let permission_mode = permission_mode
            .map(str::trim)
            .filter(|mode| !mode.is_empty())
            .and_then(|mode| {
                let parsed = PermissionMode::parse(mode);
                if parsed.is_none() {
                    warnings.push(format!(
                        "{subject}: unknown permissionMode `{mode}` (the modes are default, \
                         acceptEdits, plan, bypassPermissions and dontAsk); the agent runs \
                         with its parent's"
                    ));
                }
                parsed
            });
        if let Some(mode) = permission_mode
            && !matches!(mode, PermissionMode::Default | PermissionMode::Plan)
        {
            warnings.push(format!(
                "{subject}: permissionMode `{}` is not given: a sub-agent never gets more \
                 than its parent, so its calls are approved as its parent's are",
                mode.as_str()
            ));
        }
        for warning in &warnings {
            tracing::warn!("{warning}");
        }
        Self {
            tools,
            disallowed_tools,
            permission_mode,
            warnings,
        }
    }
}

/// `inherit` (or nothing) is the parent's model: `None`.
fn model_of(model: Option<&str>) -> Option<String> {
    model
        .map(str::trim)
        .filter(|model| !model.is_empty() && *model != "inherit")
        .map(str::to_owned)
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
            return Err(invalid("`max_steps` (`maxTurns`) must be at least 1"));
        }
        if document.body.is_empty() {
            return Err(invalid("the body (the agent's system prompt) is empty"));
        }
        let lists = Lists::read(
            &name,
            front.tools.as_ref(),
            front.disallowed_tools.as_ref(),
            front.permission_mode.as_deref(),
        );
        Ok(Self {
            name: name.trim().to_owned(),
            description: front.description.trim().to_owned(),
            tools: lists.tools,
            disallowed_tools: lists.disallowed_tools,
            model: model_of(front.model.as_deref()),
            max_steps: front.max_steps,
            permission_mode: lists.permission_mode,
            skills: front.skills.map(|list| list.names()).unwrap_or_default(),
            system_prompt: document.body,
            path: path.to_path_buf(),
            warnings: lists.warnings,
        })
    }

    /// What in the definition keel does not honour, one message per item, each naming the
    /// agent (a host shows them where it lists agents).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// A sub-agent as Claude Code's `--agents` JSON (and the Agent SDKs' `agents` option)
    /// defines one: `{"description": …, "prompt": …, "tools": ["Read", …],
    /// "disallowedTools": [...], "model": "sonnet"|"opus"|"haiku"|"inherit"|<id>, "maxTurns":
    /// 5, "permissionMode": "plan", "skills": [...]}`. Lists are read as in `.claude/agents`
    /// files; `inherit` (or no model) is the parent's model. `origin` says where it came from
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
        let list = |key: &str| -> Result<Option<NameList>, AgentsError> {
            match definition.get(key) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(value) => serde_json::from_value::<NameList>(value.clone())
                    .map(Some)
                    .map_err(|_| invalid(format!("`{key}` must be a list of names"))),
            }
        };
        let max_steps = match definition.get("maxTurns") {
            None | Some(serde_json::Value::Null) => None,
            Some(value) => Some(
                value
                    .as_u64()
                    .filter(|turns| *turns >= 1)
                    .and_then(|turns| u32::try_from(turns).ok())
                    .ok_or_else(|| {
                        invalid("`maxTurns` must be a whole number, 1 or more".into())
                    })?,
            ),
        };
        let lists = Lists::read(
            name,
            list("tools")?.as_ref(),
            list("disallowedTools")?.as_ref(),
            text("permissionMode"),
        );
        Ok(Self {
            name: name.trim().to_owned(),
            description: description.to_owned(),
            tools: lists.tools,
            disallowed_tools: lists.disallowed_tools,
            model: model_of(text("model")),
            max_steps,
            permission_mode: lists.permission_mode,
            skills: list("skills")?.map(|l| l.names()).unwrap_or_default(),
            system_prompt: prompt.to_owned(),
            path: PathBuf::from(origin),
            warnings: lists.warnings,
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
        Self::standard_dirs_with_claude(project_root, keel_home, None)
    }

    /// [`standard_dirs`](Self::standard_dirs), then Claude Code's user folder's `agents`
    /// (`~/.claude/agents`; see [`claude_user_dir`](crate::claude_user_dir)): the project's
    /// agents override the user's of the same name, as in Claude Code.
    pub fn standard_dirs_with_claude(
        project_root: &Path,
        keel_home: Option<&Path>,
        claude_home: Option<&Path>,
    ) -> Vec<PathBuf> {
        frontmatter::standard_dirs("agents", project_root, keel_home, claude_home)
    }

    /// Reads every `<dir>/<name>.md` (not `drafts/`, not README and the like). A file that
    /// cannot be used, or is a symlink to a file outside `<dir>`, is skipped with a warning
    /// naming it and the problem; a name defined twice keeps the first. An agent's own
    /// [`warnings`](AgentDefinition::warnings) (tools keel lacks or does not know) are
    /// among the warnings too, each naming the agent and its file.
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
                        None if !agent.warnings().is_empty() => {
                            warnings.extend(
                                agent
                                    .warnings()
                                    .iter()
                                    .map(|warning| format!("{warning} ({})", file.display())),
                            );
                            agents.push(agent);
                        }
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
    /// The model of the agent that owns this runner: what `inherit` means.
    parent_model: String,
    /// The skills definitions' `skills` name.
    skills: Option<Arc<SkillIndex>>,
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
            definitions,
            parent_tools,
            limits,
            depth: 0,
            extra_tools: None,
            parent_model: delegation.models().default.clone(),
            skills: None,
            delegation,
        }
    }

    /// The skills a definition's `skills` names: their instructions are put in the
    /// sub-agent's system prompt when it starts, as Claude Code injects them (a name the
    /// index lacks is a line in that prompt saying so, and a `tracing` warning). Without an
    /// index, `skills` lists are noted in the prompt the same way.
    pub fn with_skills(mut self, skills: Arc<SkillIndex>) -> Self {
        self.skills = Some(skills);
        self
    }

    /// The model agent `definition` runs on: its own (see [`Delegation::resolve_model`]),
    /// else the model of the agent that owns this runner.
    pub fn model_for(&self, definition: &AgentDefinition) -> String {
        self.delegation
            .resolve_model(definition.model.as_deref(), &self.parent_model)
    }

    /// The delegation agent `definition` runs under: the parent's, made read-only for a
    /// `plan` agent (never loosened for any).
    fn delegation_for(&self, definition: &AgentDefinition) -> Delegation {
        match definition.permission_mode {
            Some(mode) if mode.refuses_changes() => self.delegation.read_only(&format!(
                "agent `{}` runs in plan mode (permissionMode: plan): it may look, not change \
                 anything; report what should change instead",
                definition.name
            )),
            _ => self.delegation.clone(),
        }
    }

    /// Agent `definition`'s system prompt: its own, then the instructions of the skills it
    /// names.
    fn system_prompt_for(&self, definition: &AgentDefinition) -> String {
        let mut prompt = definition.system_prompt.clone();
        for name in &definition.skills {
            let body = match &self.skills {
                Some(index) => index.load(name),
                None => Err(AgentsError::not_found("skill", name, [])),
            };
            match body {
                Ok(body) => {
                    prompt.push_str(&format!("\n\n# Skill: {name}\n\n{body}"));
                }
                Err(err) => {
                    tracing::warn!(agent = %definition.name, "skill not preloaded: {err}");
                    prompt.push_str(&format!(
                        "\n\n(The skill `{name}` this agent names could not be loaded: {err}.)"
                    ));
                }
            }
        }
        prompt
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
    /// intersected with the parent's; plus `spawn_agent` one level down when depth allows;
    /// then its `disallowed_tools` taken away.
    pub fn tools_for(&self, definition: &AgentDefinition) -> Result<ToolRegistry, AgentsError> {
        let mut registry = match &definition.tools {
            Some(names) => {
                let mut names: Vec<&str> = names.iter().map(String::as_str).collect();
                names.push(ALWAYS);
                self.parent_tools.subset(&names)
            }
            None => self.parent_tools.clone(),
        };
        let disallowed = |name: &str| definition.disallowed_tools.iter().any(|n| n == name);
        let wants_spawn = definition
            .tools
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == SpawnAgentTool::NAME))
            && !disallowed(SpawnAgentTool::NAME);
        if self.depth + 1 < self.limits.depth_limit && wants_spawn {
            let parent_tools = without(&registry, &definition.disallowed_tools);
            let child = Self {
                delegation: self.delegation_for(definition),
                definitions: self.definitions.clone(),
                parent_tools,
                limits: self.limits,
                depth: self.depth + 1,
                slots: self.slots.clone(),
                extra_tools: self.extra_tools.clone(),
                parent_model: self.model_for(definition),
                skills: self.skills.clone(),
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
        Ok(without(&registry, &definition.disallowed_tools))
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
        let model = self.model_for(definition);
        let agent = self
            .delegation_for(definition)
            .agent_builder(&model)
            .tools(self.tools_for(definition)?)
            .system_prompt(self.system_prompt_for(definition))
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

/// `registry` without the tools `names` names, its own and its sources' (an MCP server's
/// `mcp__<server>__<tool>`). A source's tools are then those it has now: the sub-agent is
/// built when it starts, so it is offered the source's tools of that moment, minus `names`.
fn without(registry: &ToolRegistry, names: &[String]) -> ToolRegistry {
    if names.is_empty() {
        return registry.clone();
    }
    let sourced: Vec<String> = registry
        .sources()
        .iter()
        .flat_map(|source| source.tools())
        .map(|tool| tool.name().to_owned())
        .collect();
    if !sourced.iter().any(|name| names.contains(name)) {
        let mut narrowed = registry.clone();
        for name in names {
            narrowed.remove(name);
        }
        return narrowed;
    }
    let keep: Vec<String> = registry
        .names()
        .into_iter()
        .map(str::to_owned)
        .chain(sourced)
        .filter(|name| !names.contains(name))
        .collect();
    let keep: Vec<&str> = keep.iter().map(String::as_str).collect();
    registry.subset(&keep)
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
        Ok(ToolOutput::text(render_report(&args.agent, &report))
            .with_delegated(report.cost_by_provider))
    }
}
