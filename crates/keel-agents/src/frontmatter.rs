//! Markdown files with an optional YAML front matter block, as agents and skills are written,
//! and the folders they are found in.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::error::AgentsError;

/// A Markdown file split into its front matter (YAML, parsed) and its body.
#[derive(Debug, Clone, PartialEq)]
pub struct Document<T> {
    /// The front matter, if the file has one.
    pub front: Option<T>,
    /// Everything after it, with `\n` line ends, trimmed.
    pub body: String,
}

/// Splits `text` (CRLF tolerated) into front matter and body and parses the front matter as
/// `T`. A file that opens with `---` must close the block with a `---` line.
pub fn parse<T: DeserializeOwned>(path: &Path, text: &str) -> Result<Document<T>, AgentsError> {
    let Document { front, body } = split(path, text)?;
    let front = match front {
        Some(yaml) => Some(
            serde_yaml_ng::from_str(&yaml).map_err(|err| AgentsError::Invalid {
                path: path.to_path_buf(),
                reason: format!("front matter: {err}"),
            })?,
        ),
        None => None,
    };
    Ok(Document { front, body })
}

/// Splits `text` as [`parse`] does, leaving the front matter as its YAML text (`None` when
/// there is none or it is blank), for readers that parse it their own way.
pub fn split(path: &Path, text: &str) -> Result<Document<String>, AgentsError> {
    let text = text
        .strip_prefix('\u{feff}')
        .unwrap_or(text)
        .replace("\r\n", "\n");
    let invalid = |reason: String| AgentsError::Invalid {
        path: path.to_path_buf(),
        reason,
    };
    let Some(rest) = text.strip_prefix("---\n") else {
        return Ok(Document {
            front: None,
            body: text.trim().to_owned(),
        });
    };
    let (yaml, body) = if let Some(body) = rest.strip_prefix("---\n") {
        ("", body)
    } else {
        match rest.find("\n---\n") {
            Some(end) => (&rest[..end], &rest[end + 5..]),
            None => match rest.strip_suffix("\n---") {
                Some(yaml) => (yaml, ""),
                None => {
                    return Err(invalid(
                        "the front matter opened with `---` is never closed by a `---` line".into(),
                    ));
                }
            },
        }
    };
    let front = if yaml.trim().is_empty() {
        None
    } else {
        Some(yaml.to_owned())
    };
    Ok(Document {
        front,
        body: body.trim().to_owned(),
    })
}

/// The `.md` files directly in `dir`, sorted, leaving out `drafts/` and files whose name says
/// they are not definitions (README, CHANGELOG, LICENSE). A missing directory has none.
pub fn markdown_files(dir: &Path) -> Result<Vec<PathBuf>, AgentsError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(AgentsError::io(dir, err)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(|err| AgentsError::io(dir, err))?.path();
        if path.is_file()
            && path
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("md"))
            && !is_not_a_definition(&path)
        {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Checks that `path`, found in the definitions folder `dir`, resolves inside it (the folder
/// resolved too): a definition reached through a symlink whose target lies elsewhere is
/// refused, so a repository cannot pull files from outside its folder (`~/.ssh/...`,
/// `/etc/...`) into a prompt. The error names the file and where it leads.
pub fn check_inside(dir: &Path, path: &Path) -> Result<(), AgentsError> {
    let folder = std::fs::canonicalize(dir).map_err(|err| AgentsError::io(dir, err))?;
    let target = std::fs::canonicalize(path).map_err(|err| AgentsError::io(path, err))?;
    if target.starts_with(&folder) {
        return Ok(());
    }
    Err(AgentsError::Invalid {
        path: path.to_path_buf(),
        reason: format!(
            "it is a symlink to {}, outside {}; definitions must lie inside their folder",
            target.display(),
            dir.display()
        ),
    })
}

/// The project's definitions folders `names` (relative to `project_root`, such as
/// `.keel/agents`), without those that resolve outside the project: a repository whose
/// `.keel/skills` is a symlink to `~/notes` or `/etc` does not get those files read as its
/// definitions. A folder that does not exist is kept (it has no definitions).
pub fn project_dirs(project_root: &Path, names: &[&str]) -> Vec<PathBuf> {
    let root = std::fs::canonicalize(project_root).unwrap_or_else(|_| project_root.to_path_buf());
    names
        .iter()
        .map(|name| project_root.join(name))
        .filter(|dir| match std::fs::canonicalize(dir) {
            Ok(real) if !real.starts_with(&root) => {
                tracing::warn!(
                    folder = %dir.display(),
                    target = %real.display(),
                    "definitions folder skipped: it is a symlink out of the project"
                );
                false
            }
            _ => true,
        })
        .collect()
}

/// The folders definitions of `kind` (`agents`, `skills`) are read from, first wins: the
/// project's `.keel/<kind>` and `.claude/<kind>` ([`project_dirs`]), then `<keel_home>/<kind>`,
/// then `<claude_home>/<kind>`.
pub fn standard_dirs(
    kind: &str,
    project_root: &Path,
    keel_home: Option<&Path>,
    claude_home: Option<&Path>,
) -> Vec<PathBuf> {
    let mut dirs = project_dirs(
        project_root,
        &[&format!(".keel/{kind}"), &format!(".claude/{kind}")],
    );
    dirs.extend(keel_home.map(|home| home.join(kind)));
    dirs.extend(claude_home.map(|home| home.join(kind)));
    dirs
}

/// Claude Code's user folder, whose `agents`, `skills` and `commands` keel reads after its
/// own: `$CLAUDE_CONFIG_DIR` when set (as Claude Code takes it), else `~/.claude` (`$HOME`);
/// `None` when neither is set. The user's own folder: trusted as `$KEEL_HOME` is.
pub fn claude_user_dir() -> Option<PathBuf> {
    claude_user_dir_from(|name| std::env::var_os(name))
}

/// [`claude_user_dir`] with the variables read by `var`.
pub fn claude_user_dir_from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let set = |name: &str| {
        var(name)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    };
    set("CLAUDE_CONFIG_DIR").or_else(|| set("HOME").map(|home| home.join(".claude")))
}

/// README, CHANGELOG and LICENSE files document a folder; they define nothing.
pub fn is_not_a_definition(path: &Path) -> bool {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_ascii_uppercase())
        .unwrap_or_default();
    matches!(
        stem.as_str(),
        "README" | "CHANGELOG" | "LICENSE" | "LICENCE" | "CONTRIBUTING"
    )
}

/// The file's stem: the name a definition gets when its front matter gives none.
pub fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Front {
        name: String,
    }

    fn doc(text: &str) -> Result<Document<Front>, String> {
        parse(Path::new("a.md"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn front_matter_and_body_split_with_crlf_too() {
        let d = doc("---\r\nname: x\r\n---\r\nBody\r\nline\r\n").unwrap();
        assert_eq!(d.front, Some(Front { name: "x".into() }));
        assert_eq!(d.body, "Body\nline");
        let d = doc("Just a body\n").unwrap();
        assert_eq!(d.front, None);
        assert_eq!(d.body, "Just a body");
        let d = doc("---\nname: y\n---").unwrap();
        assert_eq!(d.body, "");
        let d = doc("---\n---\nbody").unwrap();
        assert_eq!((d.front, d.body.as_str()), (None, "body"));
    }

    #[test]
    fn claude_user_dir_follows_claude_config_dir_then_home() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        assert_eq!(
            claude_user_dir_from(vars(&[("HOME", "/h"), ("CLAUDE_CONFIG_DIR", "/c")])),
            Some(PathBuf::from("/c"))
        );
        assert_eq!(
            claude_user_dir_from(vars(&[("HOME", "/h"), ("CLAUDE_CONFIG_DIR", "")])),
            Some(PathBuf::from("/h/.claude"))
        );
        assert_eq!(claude_user_dir_from(vars(&[])), None);
    }

    #[test]
    fn broken_front_matter_is_an_error_naming_the_file() {
        assert_eq!(
            doc("---\nname: x\nbody").unwrap_err(),
            "a.md: the front matter opened with `---` is never closed by a `---` line"
        );
        assert!(
            doc("---\nname: [x\n---\n")
                .unwrap_err()
                .starts_with("a.md: front matter: ")
        );
        assert!(
            doc("---\nnom: x\n---\n")
                .unwrap_err()
                .contains("missing field `name`")
        );
    }
}
