//! Where the tools may work: the server's own roots, narrowed by the roots the client names
//! (`roots/list`), and the check that a directory an MCP host or a model names lies inside
//! them.
//!
//! The host is not trusted to widen anything: a client root counts only where it overlaps a
//! server root (a client root inside a server root narrows to it; a client root holding a
//! server root leaves that server root), so the allowed area is the intersection of the two.

use std::path::{Path, PathBuf};

/// The directories calls may work in, resolved (symlinks followed, `..` removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedRoots {
    dirs: Vec<PathBuf>,
}

impl AllowedRoots {
    /// The server's own roots: each must be an existing directory; each is resolved.
    pub fn new(dirs: impl IntoIterator<Item = impl AsRef<Path>>) -> Result<Self, String> {
        let mut resolved = Vec::new();
        for dir in dirs {
            let dir = dir.as_ref();
            let full = std::fs::canonicalize(dir)
                .ok()
                .filter(|full| full.is_dir())
                .ok_or_else(|| format!("root {}: not an existing directory", dir.display()))?;
            if !resolved.contains(&full) {
                resolved.push(full);
            }
        }
        Ok(Self { dirs: resolved })
    }

    /// The directories, resolved.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// These roots narrowed by the client's: the intersection of the two areas. `client`
    /// holds the client's roots as paths already resolved, `None` when it names none (then
    /// these roots stay as they are).
    pub fn narrowed(&self, client: Option<&[PathBuf]>) -> Self {
        let Some(client) = client else {
            return self.clone();
        };
        let mut dirs: Vec<PathBuf> = Vec::new();
        for theirs in client {
            for ours in &self.dirs {
                let overlap = if theirs.starts_with(ours) {
                    Some(theirs)
                } else if ours.starts_with(theirs) {
                    Some(ours)
                } else {
                    None
                };
                if let Some(dir) = overlap
                    && !dirs.contains(dir)
                {
                    dirs.push(dir.clone());
                }
            }
        }
        Self { dirs }
    }

    /// `dir` (relative ones read from `base`) resolved, if it is an existing directory
    /// inside one of the roots; else the message the caller reads. `what` names the argument.
    pub fn check(&self, what: &str, dir: &Path, base: &Path) -> Result<PathBuf, String> {
        let joined = base.join(dir);
        let resolved = std::fs::canonicalize(&joined)
            .ok()
            .filter(|resolved| resolved.is_dir())
            .ok_or_else(|| format!("{what}: directory not found: {}", dir.display()))?;
        if self.dirs.iter().any(|root| resolved.starts_with(root)) {
            return Ok(resolved);
        }
        let resolves = if resolved == dir {
            String::new()
        } else {
            format!(" (it resolves to {})", resolved.display())
        };
        let roots = if self.dirs.is_empty() {
            "none".to_owned()
        } else {
            self.dirs
                .iter()
                .map(|root| root.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        Err(format!(
            "{what} {}{resolves} is outside the allowed roots ({roots}); nothing was run. Give \
             a directory inside one of them.",
            dir.display()
        ))
    }
}

/// The local path a `file://` root URI names, resolved; `None` for another scheme, a
/// remote host, a path that is not absolute, or one that does not exist (such roots are
/// ignored: nothing can be checked against them).
pub fn root_path(uri: &str) -> Option<PathBuf> {
    let url = url::Url::parse(uri).ok()?;
    if url.scheme() != "file" {
        return None;
    }
    // `to_file_path` refuses a host other than none or `localhost`, and decodes `%XX`.
    let path = url.to_file_path().ok()?;
    std::fs::canonicalize(path).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::cloned_ref_to_slice_refs)]

    use super::*;

    #[test]
    fn client_roots_only_narrow() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let work = base.join("work");
        let sub = work.join("sub");
        let other = base.join("other");
        for d in [&sub, &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        let ours = AllowedRoots::new([&work]).unwrap();
        assert_eq!(ours.narrowed(None).dirs(), [work.clone()]);
        assert!(ours.narrowed(Some(&[])).dirs().is_empty());
        assert_eq!(ours.narrowed(Some(&[sub.clone()])).dirs(), [sub.clone()]);
        assert_eq!(ours.narrowed(Some(&[base.clone()])).dirs(), [work.clone()]);
        assert!(ours.narrowed(Some(&[other.clone()])).dirs().is_empty());
        assert!(
            ours.narrowed(Some(&[other.clone()]))
                .check("cwd", &sub, &base)
                .is_err()
        );
    }

    #[test]
    fn checks_resolve_relative_paths_and_dot_dots() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let work = base.join("work");
        std::fs::create_dir_all(work.join("sub")).unwrap();
        std::fs::create_dir_all(base.join("work2")).unwrap();
        let roots = AllowedRoots::new([&work]).unwrap();
        assert_eq!(
            roots.check("cwd", Path::new("sub"), &work),
            Ok(work.join("sub"))
        );
        let err = roots
            .check("cwd", Path::new("../work2"), &work)
            .unwrap_err();
        assert!(err.contains("outside the allowed roots"), "{err}");
        assert!(roots.check("cwd", &base.join("work2"), &work).is_err());
        assert!(
            roots
                .check("cwd", Path::new("missing"), &work)
                .unwrap_err()
                .contains("directory not found")
        );
    }

    #[test]
    fn file_uris_become_paths() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let spaced = base.join("a b");
        std::fs::create_dir_all(&spaced).unwrap();
        let uri = format!("file://{}", base.display()).replace(' ', "%20");
        assert_eq!(root_path(&uri), Some(base.clone()));
        let uri = format!("file://{}/a%20b", base.display());
        assert_eq!(root_path(&uri), Some(spaced));
        let uri = format!("file://localhost{}", base.display());
        assert_eq!(root_path(&uri), Some(base.clone()));
        assert_eq!(root_path("https://example.com/x"), None);
        assert_eq!(root_path("file://remote/x"), None);
        assert_eq!(root_path("file:///no/such/dir/here"), None);
        assert_eq!(root_path("file:///tmp/%zz"), None);
        assert_eq!(root_path("file:///tmp/%00"), None);
    }
}
