//! A project's config file applied over the user's: what any project may set (the model, rules
//! that forbid or ask, lower limits), and the keys that grant a power, which apply only when
//! the user trusts the project and are otherwise named in the project's notice.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::parse::{ConfigFile, ProviderSetting, SandboxConfig};
use super::{
    ApprovalMode, Config, Defaults, PermissionsConfig, Project, ProviderConfig, ProviderKind,
    TasksConfig, ToolsConfig, ToolsProfile, mcp, models, sandbox_name,
};
use keel::engine::HookConfig;

/// The keys of an untrusted project that would grant a power: each is named, and applies only
/// when the project is trusted.
struct PowerKeys {
    /// Whether the user trusts the project.
    grants: bool,
    /// The power-granting keys the file sets, in order.
    present: Vec<String>,
}

impl PowerKeys {
    /// Notes `key` when `present`; whether it applies (present, and the project trusted).
    fn take(&mut self, present: bool, key: &str) -> bool {
        if present {
            self.present.push(key.to_owned());
        }
        present && self.grants
    }
}

impl Config {
    /// The project's file (and `.mcp.json`, when there is one): what it may set depends on
    /// `project.trust`; what it may not is recorded in `project.ignored`.
    pub(super) fn apply_project(
        &mut self,
        file: ConfigFile,
        path: &Path,
        mcp_json: Option<PathBuf>,
        project: &mut Project,
    ) {
        let ConfigFile {
            provider,
            model,
            small_model,
            max_iterations,
            approvals,
            sandbox,
            mut providers,
            permissions,
            hooks,
            tools,
            tasks,
            snapshots,
            mcp_servers,
            projects,
            context_window,
            compaction_model,
            models,
        } = file;
        self.apply_any_project(path, model, small_model, &permissions);
        if !projects.is_empty() {
            project
                .ignored
                .push("projects (only your own config records trust)".into());
        }
        // The provider names keel knows without a `[providers.NAME]` table.
        for name in ProviderKind::ALL.map(ProviderKind::name) {
            if providers.remove(name).is_some() {
                project.ignored.push(format!(
                    "providers.{name} (a built-in provider is configured only in your own \
                     config or the environment)"
                ));
            }
        }
        let mut keys = PowerKeys {
            grants: project.trust.grants(),
            present: Vec::new(),
        };
        let provider = provider.unwrap_or_default();
        self.apply_powers(
            &mut keys,
            path,
            Powers {
                provider_name: provider.name.clone(),
                providers,
                approvals,
                sandbox,
                permissions,
                hooks,
            },
            project,
        );
        self.apply_runners(&mut keys, &tasks, project);
        // Snapshots are a safety net: only the user, or a project they trust, sets them.
        if let Some(snapshots) = snapshots
            && keys.take(true, "snapshots")
        {
            self.snapshots = snapshots;
        }
        self.apply_mcp(&mut keys, &tasks, mcp_servers, mcp_json, project);
        self.apply_tools_and_models(
            &mut keys,
            path,
            &tools,
            (context_window, compaction_model, models),
        );
        self.apply_limits(
            keys.grants,
            project,
            max_iterations,
            &tools,
            &tasks,
            &provider,
        );
        if !keys.grants {
            project.ignored.splice(0..0, keys.present.iter().cloned());
        }
        project.needs_trust = keys.present;
    }

    /// What any project may set, trusted or not: the model, and rules that only forbid or ask.
    fn apply_any_project(
        &mut self,
        path: &Path,
        model: Option<String>,
        small_model: Option<String>,
        permissions: &PermissionsConfig,
    ) {
        self.record_scalars(
            path,
            &[
                ("model", model.as_deref()),
                ("small_model", small_model.as_deref()),
            ],
        );
        self.record(path, "permissions.deny", &permissions.deny);
        self.record(path, "permissions.ask", &permissions.ask);
        self.model = model.or(self.model.take());
        self.small_model = small_model.or(self.small_model.take());
        self.permissions
            .deny
            .extend(permissions.deny.iter().cloned());
        self.permissions.ask.extend(permissions.ask.iter().cloned());
    }

    /// The provider, approvals, sandbox, allow rules and hooks: each only from a trusted
    /// project.
    fn apply_powers(
        &mut self,
        keys: &mut PowerKeys,
        path: &Path,
        powers: Powers,
        project: &mut Project,
    ) {
        let Powers {
            provider_name,
            providers,
            approvals,
            sandbox,
            permissions,
            hooks,
        } = powers;
        if keys.take(provider_name.is_some(), "provider") {
            self.record_scalars(path, &[("provider", provider_name.as_deref())]);
            self.provider = provider_name;
        }
        for (name, table) in providers {
            if keys.take(true, &format!("providers.{name}")) {
                self.providers.insert(name, table);
            }
        }
        if keys.take(approvals.is_some(), "approvals") {
            self.record_scalars(path, &[("approvals", approvals.map(ApprovalMode::name))]);
            self.approvals = approvals;
        }
        if let Some(sandbox) = sandbox {
            if keys.take(sandbox.mode.is_some(), "sandbox") {
                self.record_scalars(path, &[("sandbox", sandbox.mode.map(sandbox_name))]);
                self.sandbox = sandbox.mode;
            }
            if keys.take(sandbox.network.is_some(), "sandbox.network") {
                self.network = sandbox.network;
            }
            if keys.take(!sandbox.writable_roots.is_empty(), "sandbox.writable_roots") {
                self.writable_roots.extend(sandbox.writable_roots);
            }
        }
        if keys.take(!permissions.allow.is_empty(), "permissions.allow") {
            self.record(path, "permissions.allow", &permissions.allow);
            self.permissions.allow.extend(permissions.allow);
        }
        if keys.take(!hooks.is_empty(), "hooks") {
            for hook in &hooks {
                self.record(
                    path,
                    &format!("hooks.{}", hook.event),
                    std::slice::from_ref(&hook.command),
                );
            }
            project
                .commands
                .extend(hooks.iter().map(|h| h.command.clone()));
            self.hooks.extend(hooks);
        }
    }

    /// Task runners: programs a trusted project may name.
    fn apply_runners(&mut self, keys: &mut PowerKeys, tasks: &TasksConfig, project: &mut Project) {
        if keys.take(!tasks.runners.is_empty(), "tasks.runners") {
            project.commands.extend(
                tasks
                    .runners
                    .values()
                    .map(|runner| runner.command.join(" ")),
            );
            self.tasks.runners.extend(tasks.runners.clone());
        }
    }

    /// MCP servers (`[mcp_servers]` and `.mcp.json`: they start programs, or send the
    /// project's headers to a URL), and the sub-agents tasks may run.
    fn apply_mcp(
        &mut self,
        keys: &mut PowerKeys,
        tasks: &TasksConfig,
        mcp_servers: BTreeMap<String, mcp::McpServerToml>,
        mcp_json: Option<PathBuf>,
        project: &mut Project,
    ) {
        if keys.take(!mcp_servers.is_empty(), "mcp_servers") {
            project.commands.extend(
                mcp_servers
                    .values()
                    .filter_map(mcp::McpServerToml::command_line),
            );
            self.project_mcp_names.extend(mcp_servers.keys().cloned());
            self.mcp_servers.extend(mcp_servers);
        }
        if let Some(json) = mcp_json
            && keys.take(true, ".mcp.json (its MCP servers)")
        {
            project.commands.extend(mcp::commands_in_mcp_json(&json));
            self.project_mcp_json = Some(json);
        }
        if keys.take(!tasks.allowed_agents.is_empty(), "tasks.allowed_agents") {
            self.tasks
                .allowed_agents
                .extend(tasks.allowed_agents.iter().cloned());
        }
    }

    /// The tool set (any project may narrow it to lean; full — every tool, delegation and
    /// tasks included, even for a small model — only a trusted one may choose), and the
    /// model tables: a tier may send the work to another provider, a price may defeat a
    /// budget, a window decides when the conversation is summarized, and by which model.
    fn apply_tools_and_models(
        &mut self,
        keys: &mut PowerKeys,
        path: &Path,
        tools: &ToolsConfig,
        (context_window, compaction_model, models): ModelKeys,
    ) {
        if let Some(profile) = tools.profile
            && (profile == ToolsProfile::Lean || keys.take(true, "tools.profile = \"full\""))
        {
            self.record_scalars(path, &[("tools.profile", Some(profile.profile().name()))]);
            self.tools.profile = Some(profile);
        }
        // Every table is named in the notice, not only the first.
        let mut models_present = false;
        for name in models.keys() {
            models_present |= keys.take(true, &format!("models.{name}"));
        }
        let window = keys.take(context_window.is_some(), "context_window");
        let summarizer = keys.take(compaction_model.is_some(), "compaction_model");
        if models_present || window || summarizer {
            self.apply_models(path, context_window, compaction_model, models);
        }
    }

    /// Limits: a trusted project sets them; an untrusted one may only lower them.
    fn apply_limits(
        &mut self,
        grants: bool,
        project: &mut Project,
        max_iterations: Option<u32>,
        tools: &ToolsConfig,
        tasks: &TasksConfig,
        provider: &ProviderSetting,
    ) {
        let defaults = Defaults::keel();
        let mut limit = |key: &str, current: &mut Option<u64>, default: u64, value: Option<u64>| {
            let Some(value) = value else { return };
            if grants || value <= current.unwrap_or(default) {
                *current = Some(value);
            } else {
                project.ignored.push(format!(
                    "{key} (an untrusted project may only lower limits)"
                ));
            }
        };
        let mut iterations = self.max_iterations.map(u64::from);
        limit(
            "max_iterations",
            &mut iterations,
            u64::from(defaults.max_iterations),
            max_iterations.map(u64::from),
        );
        self.max_iterations = iterations.and_then(|n| u32::try_from(n).ok());
        limit(
            "tools.run_command_max_timeout_secs",
            &mut self.tools.run_command_max_timeout_secs,
            defaults.run_command_max_timeout_secs,
            tools.run_command_max_timeout_secs,
        );
        let mut running = self.tasks.max_running.map(|n| n as u64);
        limit(
            "tasks.max_running",
            &mut running,
            defaults.max_running as u64,
            tasks.max_running.map(|n| n as u64),
        );
        self.tasks.max_running = running.and_then(|n| usize::try_from(n).ok());
        limit(
            "tasks.timeout_secs",
            &mut self.tasks.timeout_secs,
            defaults.timeout_secs,
            tasks.timeout_secs,
        );
        limit(
            "provider.idle_timeout_secs",
            &mut self.idle_timeout_secs,
            defaults.idle_timeout_secs,
            provider.idle_timeout_secs,
        );
        limit(
            "provider.request_timeout_secs",
            &mut self.request_timeout_secs,
            defaults.request_timeout_secs,
            provider.request_timeout_secs,
        );
    }
}

/// The power-granting keys of a project's file that [`Config::apply_powers`] weighs.
struct Powers {
    provider_name: Option<String>,
    providers: BTreeMap<String, ProviderConfig>,
    approvals: Option<ApprovalMode>,
    sandbox: Option<SandboxConfig>,
    permissions: PermissionsConfig,
    hooks: Vec<HookConfig>,
}

/// A file's `context_window`, `compaction_model` and `[models.NAME]` tables.
type ModelKeys = (
    Option<u64>,
    Option<String>,
    BTreeMap<String, models::ModelTable>,
);
