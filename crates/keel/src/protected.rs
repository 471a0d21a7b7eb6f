//! The paths commands and the write tools may not change without the person's approval,
//! besides the sandbox's own (`.git`, the project's config files): where the workspace or a
//! writable root holds them, keel's own config, the start-up files and user-level programs of
//! the home directory (also those not created yet), and the `PATH` directories.

use std::path::{Path, PathBuf};

/// The protected paths for a workspace `cwd` with `writable_roots`: each candidate strictly
/// inside a root (a root itself, the workspace, is never made read-only).
pub(crate) fn default_protected(
    cwd: &Path,
    keel_home: &Path,
    writable_roots: &[PathBuf],
) -> Vec<PathBuf> {
    let roots: Vec<&Path> = std::iter::once(cwd)
        .chain(writable_roots.iter().map(PathBuf::as_path))
        .collect();
    let writable = |path: &Path| {
        roots
            .iter()
            .any(|root| path.starts_with(root) && path != *root)
    };
    let canonical = |path: PathBuf| std::fs::canonicalize(&path).unwrap_or(path);
    // keel's own config; the rest of its home (sessions, the task store, which keel itself
    // writes while commands run) cannot be restored around a command, hence the warning the
    // builder gives when it is writable.
    let mut candidates = vec![canonical(keel_home.to_path_buf()).join("config.toml")];
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
        let home = canonical(home);
        candidates.extend(HOME_STARTUP.iter().map(|name| home.join(name)));
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(
            std::env::split_paths(&path)
                .filter(|dir| dir.is_absolute())
                .map(canonical),
        );
    }
    let mut paths = Vec::new();
    for path in candidates {
        if writable(&path) && !paths.contains(&path) {
            paths.push(path);
        }
    }
    paths
}

/// Whether keel's home lies where commands may write (the workspace or a writable root).
pub(crate) fn home_is_writable(cwd: &Path, keel_home: &Path, writable_roots: &[PathBuf]) -> bool {
    let home = std::fs::canonicalize(keel_home).unwrap_or_else(|_| keel_home.to_path_buf());
    std::iter::once(cwd)
        .chain(writable_roots.iter().map(PathBuf::as_path))
        .any(|root| home.starts_with(root))
}

/// Files and directories in the home directory that run later outside the sandbox (a shell's
/// start-up files, user-level programs and toolchains, git's and ssh's config): each is
/// protected, existing or not, when the workspace or a writable root holds it.
const HOME_STARTUP: [&str; 28] = [
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".bash_aliases",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".inputrc",
    ".vimrc",
    ".gitconfig",
    ".config/git",
    ".config/fish",
    ".config/autostart",
    ".config/systemd",
    ".config/environment.d",
    ".ssh",
    ".gnupg",
    "bin",
    ".local/bin",
    ".cargo/bin",
    ".cargo/env",
    ".cargo/config.toml",
    ".rustup",
    ".npmrc",
    ".pypirc",
];
