//! The environment a command started by keel sees: never a credential, never a way back into
//! the user's session (terminal multiplexer, SSH or GPG agent, desktop bus, display).
//!
//! One implementation for every process keel starts: `run_command`'s commands, hooks, task
//! runners. [`scrub_env`] and [`scrub_std_env`] remove from a command's environment every
//! variable [`is_hidden_var`] names, whether inherited or set on the command.

use std::ffi::{OsStr, OsString};

/// Name endings (compared without case) of variables that hold credentials.
const SECRET_SUFFIXES: [&str; 14] = [
    "_KEY",
    "_KEY_ID",
    "APIKEY",
    "_TOKEN",
    "_SECRET",
    "_PASSWORD",
    "PASSWORD",
    "_PASSWD",
    "_PASSPHRASE",
    "_CREDENTIALS",
    "_CREDENTIAL",
    "_PAT",
    "_AUTH",
    "_COOKIE",
];

/// Variables (compared without case) that hold credentials without following the patterns.
const SECRET_NAMES: [&str; 4] = ["AWS_ACCESS_KEY_ID", "TOKEN", "SECRET", "NPM_CONFIG__AUTH"];

/// Variables that lead back into the user's session: a terminal multiplexer (`tmux
/// new-window` runs outside the sandbox), the SSH and GPG agents, the desktop bus, the
/// display server.
const SESSION_NAMES: [&str; 12] = [
    "TMUX",
    "TMUX_PANE",
    "TMUX_TMPDIR",
    "STY",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "DBUS_SESSION_BUS_ADDRESS",
    "GPG_AGENT_INFO",
    "WAYLAND_DISPLAY",
    "DISPLAY",
    "XAUTHORITY",
    "KITTY_LISTEN_ON",
];

/// Whether a process keel starts must not see the variable `name`: a credential (names ending
/// in `_KEY`, `_KEY_ID`, `APIKEY`, `_TOKEN`, `_SECRET`, `PASSWORD`, `_PASSWD`, `_PASSPHRASE`,
/// `_CREDENTIALS`, `_PAT`, `_AUTH`, `_COOKIE`, and `AWS_ACCESS_KEY_ID`; any case), a way
/// into the user's session (`TMUX`, `TMUX_PANE`, `TMUX_TMPDIR`, `STY`, `SSH_AUTH_SOCK`, `SSH_AGENT_PID`,
/// `DBUS_SESSION_BUS_ADDRESS`, `GPG_AGENT_INFO`, `WAYLAND_DISPLAY`, `DISPLAY`, `XAUTHORITY`,
/// `KITTY_LISTEN_ON`), or one of `hidden` (the variables holding keel's own keys, such as a
/// provider's `api_key_env`; compared without case).
///
/// ```
/// use keel_sandbox::is_hidden_var;
///
/// assert!(is_hidden_var("ANTHROPIC_API_KEY", &[]));
/// assert!(is_hidden_var("SSH_AUTH_SOCK", &[]));
/// assert!(is_hidden_var("MY_LLM", &["MY_LLM".to_owned()]));
/// assert!(!is_hidden_var("PATH", &[]));
/// ```
pub fn is_hidden_var(name: impl AsRef<OsStr>, hidden: &[String]) -> bool {
    let name = name.as_ref().to_string_lossy();
    let upper = name.to_ascii_uppercase();
    SECRET_SUFFIXES.iter().any(|suffix| upper.ends_with(suffix))
        || SECRET_NAMES.contains(&upper.as_str())
        || is_session_var(name.as_ref())
        || hidden.iter().any(|h| h.eq_ignore_ascii_case(&name))
}

/// Whether the variable `name` leads back into the user's session (a terminal multiplexer,
/// an SSH or GPG agent, the desktop bus, the display): what even keel's own processes that
/// keep its credentials (the runner of a background task, which calls the model) must not get.
///
/// ```
/// assert!(keel_sandbox::is_session_var("TMUX"));
/// assert!(!keel_sandbox::is_session_var("ANTHROPIC_API_KEY"));
/// ```
pub fn is_session_var(name: impl AsRef<OsStr>) -> bool {
    SESSION_NAMES.contains(&name.as_ref().to_string_lossy().as_ref())
}

/// The names `command` must not pass on: hidden variables of this process's environment
/// and of those set on the command itself.
fn hidden_names<'a>(
    set_on_command: impl Iterator<Item = &'a OsStr>,
    hidden: &[String],
) -> Vec<OsString> {
    std::env::vars_os()
        .map(|(name, _)| name)
        .chain(set_on_command.map(OsStr::to_os_string))
        .filter(|name| is_hidden_var(name, hidden))
        .collect()
}

/// Removes every variable [`is_hidden_var`] names (with `hidden`) from what `command` will
/// see, inherited or set on it.
pub fn scrub_std_env(command: &mut std::process::Command, hidden: &[String]) {
    let names = hidden_names(command.get_envs().map(|(name, _)| name), hidden);
    for name in names {
        command.env_remove(name);
    }
}

/// [`scrub_std_env`] for a tokio command: hooks, task runners and every other process keel
/// starts use this, so they see what `run_command`'s commands see.
pub fn scrub_env(command: &mut tokio::process::Command, hidden: &[String]) {
    scrub_std_env(command.as_std_mut(), hidden);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_session_variables_are_hidden() {
        for name in [
            "ANTHROPIC_API_KEY",
            "openai_api_key",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
            "AWS_SESSION_TOKEN",
            "PGPASSWORD",
            "CLIENT_SECRET",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "GITHUB_PAT",
            "SSH_KEY",
            "TMUX",
            "SSH_AUTH_SOCK",
            "DBUS_SESSION_BUS_ADDRESS",
            "DISPLAY",
        ] {
            assert!(is_hidden_var(name, &[]), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "TOKENIZERS_PARALLELISM",
            "KEYBOARD",
            "TERM",
            "DISPLAYNAME",
            "PATTERN",
        ] {
            assert!(!is_hidden_var(name, &[]), "{name}");
        }
        assert!(is_hidden_var("my_llm", &["MY_LLM".to_owned()]));
    }

    #[test]
    fn variables_set_on_the_command_are_scrubbed_too() {
        let mut command = std::process::Command::new("env");
        command.env("EXTRA_API_KEY", "x").env("VISIBLE", "y");
        scrub_std_env(&mut command, &[]);
        let envs: Vec<_> = command.get_envs().collect();
        assert!(
            envs.contains(&(OsStr::new("EXTRA_API_KEY"), None)),
            "{envs:?}"
        );
        assert!(
            envs.contains(&(OsStr::new("VISIBLE"), Some(OsStr::new("y")))),
            "{envs:?}"
        );
    }
}
