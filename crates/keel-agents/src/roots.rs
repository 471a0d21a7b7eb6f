//! Where delegated work may go: the workspace and the sandbox policy's writable roots,
//! resolved (symlinks followed, `..` removed), and the check that a directory the model
//! names lies inside one of them.

use std::path::{Path, PathBuf};

/// The roots of a session working in `workspace` whose commands may also write `writable`:
/// each resolved to a canonical path. Writable roots that do not exist are left out (the
/// sandbox skips them too); a workspace that cannot be resolved is kept as given, so nothing
/// resolved can lie inside it unless it is that very path.
pub fn resolve(workspace: &Path, writable: &[PathBuf]) -> Vec<PathBuf> {
    let mut roots = vec![std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_owned())];
    for dir in writable {
        if let Ok(dir) = std::fs::canonicalize(dir)
            && !roots.contains(&dir)
        {
            roots.push(dir);
        }
    }
    roots
}

/// `dir` resolved, if it is an existing directory inside one of `roots`; else the message
/// the model reads. `what` names the argument (`cwd`, `workdir`).
pub fn check(what: &str, dir: &Path, roots: &[PathBuf]) -> Result<PathBuf, String> {
    let resolved = std::fs::canonicalize(dir)
        .ok()
        .filter(|resolved| resolved.is_dir())
        .ok_or_else(|| format!("directory not found: {}", dir.display()))?;
    if roots.iter().any(|root| resolved.starts_with(root)) {
        return Ok(resolved);
    }
    let resolves = if resolved == dir {
        String::new()
    } else {
        format!(" (it resolves to {})", resolved.display())
    };
    Err(format!(
        "{what} {}{resolves} is outside this session's roots: {}; delegated work stays inside \
         them, so give a directory inside one",
        dir.display(),
        show(roots)
    ))
}

/// The roots, comma-separated.
fn show(roots: &[PathBuf]) -> String {
    if roots.is_empty() {
        return "none".into();
    }
    roots
        .iter()
        .map(|root| root.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_directories_inside_a_root_pass() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let work = base.join("work");
        let cache = base.join("cache");
        let other = base.join("other");
        for d in [&work, &cache, &other, &work.join("sub")] {
            std::fs::create_dir_all(d).unwrap();
        }
        let roots = resolve(&work, &[cache.clone(), base.join("missing")]);
        assert_eq!(roots, [work.clone(), cache.clone()]);
        assert_eq!(
            check("cwd", &work.join("sub"), &roots),
            Ok(work.join("sub"))
        );
        assert_eq!(check("cwd", &cache, &roots), Ok(cache.clone()));
        let err = check("cwd", &work.join("sub/../../other"), &roots).unwrap_err();
        assert!(
            err.starts_with(&format!(
                "cwd {} (it resolves to {}) is outside this session's roots: {}, {};",
                work.join("sub/../../other").display(),
                other.display(),
                work.display(),
                cache.display()
            )),
            "{err}"
        );
        // A sibling whose name starts like a root is not inside it.
        std::fs::create_dir_all(base.join("work2")).unwrap();
        assert!(check("cwd", &base.join("work2"), &roots).is_err());
        assert_eq!(
            check("cwd", &base.join("nope"), &roots).unwrap_err(),
            format!("directory not found: {}", base.join("nope").display())
        );
    }
}
