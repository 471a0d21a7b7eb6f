//! The lean tool set: the built-in tools a small model needs, under short definitions.

use std::sync::Arc;

use keel_tool::{Brief, RegistryError, ToolRegistry};

use crate::policy::SandboxPolicy;
use crate::{PathSandbox, default_tools};

/// The tools of [`lean_tools`] and their short descriptions (`{network}` in run_command's
/// says whether commands have the network).
const BRIEF: [(&str, &str); 6] = [
    (
        "read_file",
        "Read a text file. Lines come numbered (`N<TAB>text`; the numbers are not in the file). \
         start_line and end_line read a part.",
    ),
    (
        "list_directory",
        "List a directory as a tree (default: the workspace root, 2 levels).",
    ),
    (
        "grep",
        "Search file contents for a regex (ripgrep syntax); returns path:line:text lines. path \
         narrows the search, glob keeps files like \"*.rs\".",
    ),
    (
        "write_file",
        "Create a file, or replace a file's whole content.",
    ),
    (
        "patch_file",
        "Edit a file: replace old_string, which must occur exactly once, with new_string. Copy \
         old_string from read_file, without the line numbers.",
    ),
    (
        "run_command",
        "Run a shell command with bash -c in the workspace root; returns its output and exit \
         code. No stdin{network}.",
    ),
];

/// The names of the tools [`lean_tools`] offers (the write tools only where writing is
/// allowed).
pub const LEAN_TOOLS: [&str; 6] = [
    BRIEF[0].0, BRIEF[1].0, BRIEF[2].0, BRIEF[3].0, BRIEF[4].0, BRIEF[5].0,
];

/// The lean tool set, for models with a small context window: `read_file`,
/// `list_directory`, `grep` and `run_command`, plus `write_file` and `patch_file` unless
/// `policy` is [`SandboxMode::ReadOnly`](crate::SandboxMode::ReadOnly) — what it takes to read, search, edit and run code.
/// `glob` (grep, list_directory and `find` cover it) and the git tools (`git status`, `git
/// diff` through run_command) are left out.
///
/// Each is the very tool [`default_tools`] makes, offered as a [`Brief`]: a description of
/// one or two sentences and its schema without per-argument descriptions, about a fifth of
/// the full definitions' size. Paths, protected files, confinement and each call's effect
/// are the full tools' own.
///
/// ```
/// use keel_sandbox::{PathSandbox, SandboxPolicy, lean_tools};
///
/// let dir = tempfile::tempdir()?;
/// let registry = lean_tools(&PathSandbox::new(dir.path())?, &SandboxPolicy::default())?;
/// assert_eq!(
///     registry.names(),
///     ["grep", "list_directory", "patch_file", "read_file", "run_command", "write_file"]
/// );
/// let size: usize = registry.definitions().iter().map(|d| serde_json::to_string(d).unwrap().len()).sum();
/// assert!(size < 2_500, "{size} bytes");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn lean_tools(
    sandbox: &PathSandbox,
    policy: &SandboxPolicy,
) -> Result<ToolRegistry, RegistryError> {
    let full = default_tools(sandbox, policy)?;
    let network = if policy.commands_have_network() {
        ""
    } else {
        ", no network"
    };
    let mut lean = ToolRegistry::new();
    for (name, description) in BRIEF {
        if let Some(tool) = full.get(name) {
            let description = description.replace("{network}", network);
            lean.register_dyn(Arc::new(Brief::of(tool, description)))?;
        }
    }
    Ok(lean)
}
