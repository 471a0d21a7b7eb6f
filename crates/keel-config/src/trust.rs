//! Trusting a project: `keel trust [DIR]`, `keel untrust [DIR]` and the interactive question.
//!
//! A decision is a `[projects."DIR"]` table in the user's `$KEEL_HOME/config.toml`, pinned to
//! the hash of the project's power-granting files (see [`crate::files::project`]); the rest of the
//! file is kept as the user wrote it (comments, order).

use std::io::Write;
use std::path::{Path, PathBuf};

use toml_edit::{DocumentMut, Item, Table, value};

use crate::Error;
use crate::files::{self, project};
use crate::settings::{Overrides, existing_dir, given_dir, keel_home};

/// Records the user's decision about the project in `dir` (canonical), pinned to `hash`, in
/// `$KEEL_HOME/config.toml` (`keel_home`); creates the file if needed.
pub fn record(keel_home: &Path, dir: &Path, hash: &str, trusted: bool) -> Result<(), String> {
    edit(keel_home, |projects| {
        let mut entry = Table::new();
        entry.insert("trusted", value(trusted));
        entry.insert("config_hash", value(hash));
        projects.insert(&dir.display().to_string(), Item::Table(entry));
    })
}

/// Removes the decision about the project in `dir`; returns whether there was one.
pub fn forget(keel_home: &Path, dir: &Path) -> Result<bool, String> {
    let mut removed = false;
    edit(keel_home, |projects| {
        removed = projects.remove(&dir.display().to_string()).is_some();
    })?;
    Ok(removed)
}

/// Applies `change` to the `[projects]` table of the user's config and writes the file back
/// atomically, after checking the result is still a valid config.
fn edit(keel_home: &Path, change: impl FnOnce(&mut Table)) -> Result<(), String> {
    let path = keel_home.join("config.toml");
    let shown = path.display().to_string();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(err) => return Err(format!("{shown}: cannot read it: {err}")),
    };
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|err| format!("{shown}: cannot edit it: {err}"))?;
    let projects = doc
        .entry("projects")
        .or_insert_with(|| {
            let mut table = Table::new();
            table.set_implicit(true);
            Item::Table(table)
        })
        .as_table_mut()
        .ok_or_else(|| format!("{shown}: `projects` is not a table; fix it by hand"))?;
    change(projects);
    let text = doc.to_string();
    files::parse_user(&path, &text).map_err(|err| err.to_string())?;
    write_atomic(&path, text.as_bytes()).map_err(|err| format!("{shown}: cannot write it: {err}"))
}

/// Writes `path` through a temp file renamed over it; a new file is readable only by its
/// owner, an existing one keeps its mode.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mode = std::fs::metadata(path).map_or(0o600, |meta| meta.permissions().mode() & 0o7777);
    let temp = dir.join(format!(".config.toml.keel-{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// The project directory `dir` stands for, canonical: without `dir`, the directory keel works
/// in (`-C`'s, else the current one); a relative `dir` is read from there (as `git -C`).
fn project_of(dir: Option<&Path>, overrides: &Overrides) -> Result<PathBuf, Error> {
    let given = match dir {
        Some(dir) if dir.is_absolute() => dir.to_path_buf(),
        Some(dir) => given_dir(overrides)?.join(dir),
        None => given_dir(overrides)?,
    };
    Ok(project::locate(&existing_dir(&given, "")?))
}

/// The power files present in `dir`, as names.
fn present(dir: &Path) -> Vec<&'static str> {
    project::POWER_FILES
        .into_iter()
        .filter(|name| dir.join(name).is_file())
        .collect()
}

/// `keel [-C CWD] trust [DIR]`: trusts the project `dir` stands for (a relative `dir` is read
/// from the working directory); returns what is now trusted, for the person.
pub fn trust_project(dir: Option<&Path>, overrides: &Overrides) -> Result<String, Error> {
    let home = keel_home()?;
    let dir = project_of(dir, overrides)?;
    let hash = project::config_hash(&dir);
    record(&home, &dir, &hash, true).map_err(Error::Invalid)?;
    let files = present(&dir);
    let what = if files.is_empty() {
        "it has no configuration files yet; trust lapses when one is added".to_owned()
    } else {
        format!(
            "its {} may grant powers (approvals, sandbox, hooks, runners, providers) as long as \
             they stay as they are now",
            files.join(", ")
        )
    };
    let short = hash.get(..19).unwrap_or(&hash);
    Ok(format!(
        "trusted {}: {what} (pinned to {short}…; `keel untrust` undoes this)",
        dir.display()
    ))
}

/// `keel [-C CWD] untrust [DIR]`: forgets the decision about the project `dir` stands for;
/// returns what changed, for the person.
pub fn untrust_project(dir: Option<&Path>, overrides: &Overrides) -> Result<String, Error> {
    let home = keel_home()?;
    let dir = project_of(dir, overrides)?;
    let removed = forget(&home, &dir).map_err(Error::Invalid)?;
    Ok(if removed {
        format!(
            "{} is no longer trusted: its configuration may only tighten what keel does",
            dir.display()
        )
    } else {
        format!("{} was not trusted; nothing changed", dir.display())
    })
}

/// The interactive question about an untrusted project whose configuration sets `keys`.
pub fn question(file: &Path, keys: &[String], changed: bool) -> String {
    let since = if changed {
        " It changed since you trusted it."
    } else {
        ""
    };
    format!(
        "{} sets {}, which only a trusted project may set (hooks and runners run programs).{since} \
         Trust this project? [y/N] ",
        file.display(),
        keys.join(", ")
    )
}
