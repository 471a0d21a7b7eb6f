//! `keel mcp-server`: the agent `keel exec` would build (its sandbox, rules, hooks and
//! approvals) handed to `keel::mcp_host`, which serves its `code` and task tools and tells
//! the host when its tasks end; here are the flags, the token and the host's approvals.

use std::path::PathBuf;

use keel::engine::{ApprovalRequest, Approver, Decision, DenyGated, Hooks};
use keel::mcp::server::{BearerToken, Confirmation};

use crate::cli::{McpServerArgs, Options};
use crate::error::CliError;
use crate::print::progress;
use crate::signals;
use keel_config::ApprovalMode;
use keel_config::{SessionChoice, Surface, existing_dir};
use keel_host::{ModeApprover, approval_question};

/// The variable holding the bearer token when `--token-env` names none.
const TOKEN_VAR: &str = "KEEL_MCP_TOKEN";

/// Gated calls of a host's runs: `--approvals allow` allows them, `--approvals deny` refuses
/// them; otherwise the host's user is asked through elicitation where the client supports
/// it, and they are refused where it does not.
struct HostApprover {
    mode: Option<ApprovalMode>,
    fixed: ModeApprover,
}

impl HostApprover {
    fn new(mode: Option<ApprovalMode>) -> Self {
        let fixed = match mode {
            Some(ApprovalMode::Allow) => ApprovalMode::Allow,
            _ => ApprovalMode::Deny,
        };
        Self {
            mode,
            fixed: ModeApprover::starting(keel_config::LiveMode::of(fixed), None),
        }
    }

    fn asks(&self) -> bool {
        matches!(self.mode, None | Some(ApprovalMode::Ask))
    }
}

#[async_trait::async_trait]
impl Approver for HostApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        if self.asks()
            && let Some(client) = keel::mcp::server::current_client()
        {
            // The question without its `[y/N/a(lways)]`: the host's form has its own answers.
            let question = approval_question(request);
            let question = question
                .split(" [y/N")
                .next()
                .unwrap_or_default()
                .trim_end();
            match client.confirm(question).await {
                Confirmation::Accepted => return Decision::Allow,
                Confirmation::Declined => {
                    return Decision::Deny(
                        "the user declined this call; ask them or do it another way".into(),
                    );
                }
                _ => {}
            }
        }
        if self.asks() {
            return DenyGated.approve(request).await;
        }
        self.fixed.approve(request).await
    }

    fn allows_unattended(&self) -> bool {
        self.fixed.allows_unattended()
    }
}

/// The roots the flags give, resolved; the working directory without any.
fn roots(args: &McpServerArgs, cwd: &std::path::Path) -> Result<Vec<PathBuf>, CliError> {
    if args.roots.is_empty() {
        return Ok(vec![cwd.to_path_buf()]);
    }
    args.roots
        .iter()
        .map(|dir| Ok(existing_dir(dir, "--root ")?))
        .collect()
}

/// The bearer token for `--listen`, from `--token-env`'s variable or `KEEL_MCP_TOKEN`.
fn token(args: &McpServerArgs) -> Result<BearerToken, CliError> {
    let var = args.token_env.as_deref().unwrap_or(TOKEN_VAR);
    let value = std::env::var(var).unwrap_or_default();
    if value.is_empty() {
        return Err(CliError::Usage(format!(
            "--listen needs a bearer token in ${var}: set it (e.g. {var}=$(openssl rand -hex \
             32)) and give it to the MCP host as `Authorization: Bearer <token>`"
        )));
    }
    BearerToken::new(value).map_err(|err| CliError::Usage(format!("${var}: {err}")))
}

/// Runs `keel mcp-server`; returns the exit code.
pub(crate) async fn run(options: &Options, args: McpServerArgs) -> Result<u8, CliError> {
    let token = args.listen.map(|_| token(&args)).transpose()?;
    let mut setup = options.settings(Surface::Headless, &SessionChoice::New)?;
    for notice in &setup.notices {
        progress(&format!("keel: {notice}"));
    }
    let roots = roots(&args, &setup.cwd)?;
    // Calls may work in every root: the roots beyond the working directory are writable.
    for root in &roots {
        if !root.starts_with(&setup.cwd) && !setup.policy.writable_roots.contains(root) {
            setup.policy.writable_roots.push(root.clone());
        }
    }
    let asked = if options.yes {
        Some(ApprovalMode::Allow)
    } else {
        options.approvals.or(setup.config.approvals)
    };
    // The host is served `code` and the task tools: the full set's, whatever profile the
    // flags or config name for keel's own sessions.
    setup.tool_profile = Some(keel::ToolProfile::Full);
    let coding = setup.agent(HostApprover::new(asked), Hooks::new())?;
    for warning in coding.warnings() {
        progress(&format!("keel: warning: {warning}"));
    }
    let server = keel::mcp_host::mcp_tool_server(&coding, roots).map_err(|err| {
        CliError::Usage(format!("{err}: drop --no-delegation for keel mcp-server"))
    })?;
    let watcher = coding
        .tasks()
        .cloned()
        .map(|launcher| tokio::spawn(keel::mcp_host::tell_task_ends(server.clone(), launcher)));
    let served = match (args.listen, token) {
        (Some(addr), Some(token)) => {
            let http = server
                .serve_http(addr, token)
                .await
                .map_err(|err| CliError::Run(err.to_string()))?;
            progress(&format!("keel: MCP server at {}", http.url()));
            if !addr.ip().is_loopback() {
                progress(&format!(
                    "keel: warning: {addr} is not a loopback address: whoever can reach it and \
                     has the token can run keel here"
                ));
            }
            signals::interrupted().await;
            http.shutdown();
            http.wait().await;
            Ok(())
        }
        _ => {
            tokio::select! {
                served = server.serve_stdio() => served,
                _ = signals::interrupted() => Ok(()),
            }
        }
    };
    if let Some(watcher) = watcher {
        watcher.abort();
    }
    served.map_err(|err| CliError::Run(err.to_string()))?;
    Ok(0)
}
