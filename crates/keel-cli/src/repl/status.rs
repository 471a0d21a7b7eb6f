//! The banner's second line (approval mode, sandbox, network), the prompt in its mode, and
//! lines that wrap between their parts at the terminal's width; the rest of a session's
//! status is keel-host's ([`keel_host::report::status`]).

use keel::sandbox::{SandboxMode, SandboxPolicy};
use keel_config::LiveMode;
pub(super) use keel_host::report::status::{context_lines, mode_line, provider_label, turn_line};
use keel_host::stream_json::sandbox_name;

/// The banner's parts about what the session may do: the approval mode, the sandbox, the
/// network.
pub(super) fn powers(mode: LiveMode, policy: &SandboxPolicy) -> [String; 3] {
    let network = policy.network || policy.mode == SandboxMode::FullAccess;
    [
        format!("approvals: {} (Shift-Tab: next mode)", mode.name()),
        format!("sandbox: {}", sandbox_name(policy.mode)),
        format!("network: {}", if network { "on" } else { "off" }),
    ]
}

/// `parts` joined with ` · ` into lines of at most `width` characters where they fit (a
/// part is never cut; one longer than a line gets a line of its own); lines after the first
/// are indented.
pub(super) fn join_fitting(parts: &[String], width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for part in parts {
        if line.is_empty() {
            line = if lines.is_empty() {
                part.clone()
            } else {
                format!("  {part}")
            };
        } else if line.chars().count() + 3 + part.chars().count() <= width {
            line.push_str(" · ");
            line.push_str(part);
        } else {
            line.push_str(" ·");
            lines.push(std::mem::replace(&mut line, format!("  {part}")));
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The prompt: `base`, after the approval mode when it is not `ask` (`[read-only] keel> `).
pub(super) fn prompt(base: &str, mode: LiveMode) -> String {
    match mode {
        LiveMode::Ask => base.to_owned(),
        mode => format!("[{}] {base}", mode.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_joined_and_never_cut() {
        let parts = ["keel 1".to_owned(), "a-model".to_owned(), "x".repeat(30)];
        assert_eq!(
            join_fitting(&parts, 80),
            ["keel 1 · a-model · ".to_owned() + &"x".repeat(30)]
        );
        assert_eq!(
            join_fitting(&parts, 20),
            [
                "keel 1 · a-model ·".to_owned(),
                format!("  {}", "x".repeat(30))
            ]
        );
    }
}
