//! What a task runs with: its launching session's sandbox policy, roots, allow-read paths,
//! approvals, permission rules and hooks, and the runner's command line, recorded with the
//! task so that its supervisor and its runner never look anywhere else (a project's config
//! in particular) to find out.

use std::path::{Path, PathBuf};

use keel_engine::{HookConfig, PermissionError, PermissionRules, RuleTexts};
use keel_sandbox::SandboxPolicy;
use serde::{Deserialize, Serialize};

use crate::{TaskError, TaskStore};
use keel_agents::roots;

/// Who approves a task's gated calls. A task runs with no person to ask, so the session's
/// `ask` becomes [`TaskApprovals::Deny`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskApprovals {
    /// Gated calls are refused (the model is told why).
    #[default]
    Deny,
    /// Gated calls are allowed (the session ran with `--approvals allow` / `-y`).
    Allow,
}

/// The settings a task runs with, recorded with it (as JSON, in the store) when it starts.
///
/// A [`TaskLauncher`](crate::TaskLauncher) is built with its session's settings; it records
/// them with every task it starts, the runner's argument template included. The supervisor
/// runs that template (never re-reading a configuration), refuses a task recorded without
/// settings (by an older keel), and checks the task's directory lies inside
/// [`roots`](Self::roots). keel's own runner (`keel exec`) finds them with [`load_settings`]
/// by its `KEEL_TASK_ID` and applies them itself; other runners are confined by
/// [`policy`](Self::policy).
///
/// ```
/// use keel_tasks::{TaskApprovals, TaskSettings};
/// use keel_sandbox::SandboxPolicy;
///
/// let workspace = tempfile::tempdir()?;
/// let settings = TaskSettings::new(workspace.path(), SandboxPolicy::default())
///     .with_approvals(TaskApprovals::Deny)
///     .with_rules(vec!["run_command(cargo test*)".into()], vec!["run_command(rm *)".into()]);
/// assert_eq!(settings.roots, [workspace.path().canonicalize()?]);
/// let json = serde_json::to_string(&settings)?;
/// assert_eq!(serde_json::from_str::<TaskSettings>(&json)?, settings);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct TaskSettings {
    /// The launching session's sandbox policy: mode, network, writable roots, protected
    /// paths, hidden variables.
    pub policy: SandboxPolicy,
    /// Where the task may work: the session's workspace and the policy's writable roots,
    /// resolved. A task's directory must lie inside one of them.
    pub roots: Vec<PathBuf>,
    /// Paths the file tools may also read.
    pub allow_read: Vec<PathBuf>,
    /// Who approves gated calls.
    pub approvals: TaskApprovals,
    /// Permission allow rules, as written (`run_command(cargo test*)`, `Bash(npm test:*)`).
    pub allow_rules: Vec<String>,
    /// Permission ask rules, as written (`Bash(git push:*)`): calls they match are asked
    /// about every time, so in a task (nobody to ask) they are refused unless approvals
    /// allow. Absent from settings recorded by an older keel, which had none.
    pub ask_rules: Vec<String>,
    /// Permission deny rules, as written.
    pub deny_rules: Vec<String>,
    /// Where Claude Code's `/path` rule patterns start: the launching session's project root
    /// (its working directory when its rules had none), so that the task's rules match
    /// what the session's did wherever the task works. `None` (settings recorded by an older
    /// keel): the task's working directory.
    pub project_root: Option<PathBuf>,
    /// Where `~/path` rule patterns start: the launching session's home directory. `None`:
    /// the task process's `$HOME`.
    pub home: Option<PathBuf>,
    /// Command hooks.
    pub hooks: Vec<HookConfig>,
    /// The runner's argument template (`{task}` and `{workdir}` not yet filled in), set by
    /// the launcher for each task from its [`Runners`](crate::Runners).
    pub runner: Vec<String>,
}

impl TaskSettings {
    /// The settings of every task an agent working in `workspace` under `policies` starts:
    /// the same sandbox policy, allow-read paths, permission rules and command hooks; gated
    /// calls allowed only if the agent's approver allows them with nobody there to ask
    /// ([`Approver::allows_unattended`](keel_engine::Approver::allows_unattended)). So a task
    /// is never freer than the agent that starts it.
    ///
    /// Refused when the agent has Rust hooks: a task's own process cannot run them, so it
    /// would be freer than its parent.
    pub fn from_policies(
        workspace: &Path,
        policies: &keel_agents::Policies,
    ) -> Result<Self, TaskError> {
        let hooks = policies.hooks();
        if hooks.has_in_process_hooks() {
            return Err(TaskError::Refused(
                "the agent has in-process hooks, which a task's own process cannot run".into(),
            ));
        }
        let rules = policies.permissions();
        // The anchors the session's rules resolve paths from, as they do for the session
        // (which works in `workspace`): a task working elsewhere must not move them.
        let context = rules.context(workspace);
        let approvals = if policies.approver().allows_unattended() {
            TaskApprovals::Allow
        } else {
            TaskApprovals::Deny
        };
        Ok(Self::new(workspace, policies.sandbox().clone())
            .with_allow_read(policies.allow_read().to_vec())
            .with_approvals(approvals)
            .with_rule_texts(rules.texts())
            .with_anchors(Some(context.project_root), context.home)
            .with_hooks(hooks.command_configs()))
    }

    /// The settings of a session working in `workspace` under `policy`: its roots are the
    /// workspace and the policy's writable roots, resolved; approvals deny; no allow-read
    /// paths, rules or hooks until the `with_` methods say otherwise.
    pub fn new(workspace: &Path, policy: SandboxPolicy) -> Self {
        Self {
            roots: roots::resolve(workspace, &policy.writable_roots),
            policy,
            ..Self::default()
        }
    }

    /// Paths the file tools may also read: give the session's.
    pub fn with_allow_read(mut self, paths: Vec<PathBuf>) -> Self {
        self.allow_read = paths;
        self
    }

    /// Who approves gated calls.
    pub fn with_approvals(mut self, approvals: TaskApprovals) -> Self {
        self.approvals = approvals;
        self
    }

    /// The session's allow and deny rules, as written (no ask rules: see
    /// [`with_rule_texts`](Self::with_rule_texts)).
    pub fn with_rules(mut self, allow: Vec<String>, deny: Vec<String>) -> Self {
        self.allow_rules = allow;
        self.ask_rules = Vec::new();
        self.deny_rules = deny;
        self
    }

    /// The session's allow, ask and deny rules, as written
    /// ([`PermissionRules::texts`]).
    pub fn with_rule_texts(mut self, texts: RuleTexts) -> Self {
        self.allow_rules = texts.allow;
        self.ask_rules = texts.ask;
        self.deny_rules = texts.deny;
        self
    }

    /// Where the rules' `/path` patterns (`project_root`) and `~/path` patterns (`home`)
    /// start; `None` leaves them to the task's working directory and `$HOME`.
    pub fn with_anchors(mut self, project_root: Option<PathBuf>, home: Option<PathBuf>) -> Self {
        self.project_root = project_root;
        self.home = home;
        self
    }

    /// The rules as written ([`allow_rules`](Self::allow_rules),
    /// [`ask_rules`](Self::ask_rules), [`deny_rules`](Self::deny_rules)).
    pub fn rule_texts(&self) -> RuleTexts {
        RuleTexts {
            allow: self.allow_rules.clone(),
            ask: self.ask_rules.clone(),
            deny: self.deny_rules.clone(),
        }
    }

    /// The permission rules the task runs with: its allow, ask and deny rules, with
    /// `/path` and `~/path` patterns starting where the launching session's did. What
    /// keel's runner (`keel exec` with `KEEL_TASK_ID`) gives its agent. The first invalid
    /// rule is the error.
    ///
    /// ```
    /// use keel_engine::RuleTexts;
    /// use keel_sandbox::SandboxPolicy;
    /// use keel_tasks::TaskSettings;
    ///
    /// let workspace = tempfile::tempdir()?;
    /// let settings = TaskSettings::new(workspace.path(), SandboxPolicy::default()).with_rule_texts(
    ///     RuleTexts {
    ///         ask: vec!["Bash(git push:*)".into()],
    ///         deny: vec!["Bash(rm:*)".into()],
    ///         ..RuleTexts::default()
    ///     },
    /// );
    /// let rules = settings.permission_rules()?;
    /// assert_eq!(rules.ask[0].to_string(), "Bash(git push:*)");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn permission_rules(&self) -> Result<PermissionRules, PermissionError> {
        let mut rules = PermissionRules::from_texts(&self.rule_texts())?;
        if let Some(root) = &self.project_root {
            rules = rules.with_project_root(root);
        }
        if let Some(home) = &self.home {
            rules = rules.with_home(home);
        }
        Ok(rules)
    }

    /// The session's command hooks.
    pub fn with_hooks(mut self, hooks: Vec<HookConfig>) -> Self {
        self.hooks = hooks;
        self
    }

    /// `dir` resolved, if it is a directory inside [`roots`](Self::roots); else why not,
    /// naming the roots.
    pub fn check_workdir(&self, dir: &Path) -> Result<PathBuf, TaskError> {
        roots::check("workdir", dir, &self.roots).map_err(TaskError::Refused)
    }
}

/// The settings task `id` was recorded with: what keel's own runner (`keel exec` started
/// with `KEEL_TASK_ID`) applies. [`TaskError::NotFound`] when there is no such task;
/// [`TaskError::Refused`] when it was recorded without settings (by an older keel), which
/// must not run.
pub fn load_settings(store: &dyn TaskStore, id: &str) -> Result<TaskSettings, TaskError> {
    let record = store
        .get(id)?
        .ok_or_else(|| TaskError::NotFound { id: id.to_owned() })?;
    record
        .settings
        .ok_or_else(|| TaskError::Refused(no_settings(id)))
}

/// Why a task without settings does not run.
pub(crate) fn no_settings(id: &str) -> String {
    format!(
        "task {id} was recorded without the settings it must run with (by an older keel, or \
         they are unreadable), so it was not run; start it again"
    )
}
