//! Runners: the command lines that do a task's work. `keel` runs keel's own agent loop;
//! others come from the config, e.g. `claude -p {task} --output-format json`.

use std::collections::BTreeMap;
use std::path::Path;

use crate::TaskError;

/// The runner every task gets unless it names another.
pub const DEFAULT_RUNNER: &str = "keel";

/// The runners, by name, as argument templates: `{task}` in an argument becomes the task's
/// text and `{workdir}` its directory. The task is always one argument, never run through a
/// shell.
///
/// `keel` is keel's own runner: it applies the task's settings itself, so it runs without
/// the confinement other runners get, and no configuration may replace it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runners {
    templates: BTreeMap<String, Vec<String>>,
}

impl Runners {
    /// The `keel` runner only: `keel_exe exec --output-format json -C {workdir} {task}`.
    pub fn new(keel_exe: &Path) -> Self {
        let keel = [
            keel_exe.display().to_string(),
            "exec".into(),
            "--output-format".into(),
            "json".into(),
            "-C".into(),
            "{workdir}".into(),
            "{task}".into(),
        ];
        Self {
            templates: BTreeMap::from([(DEFAULT_RUNNER.to_owned(), keel.to_vec())]),
        }
    }

    /// Adds (or replaces) runner `name` with the argument template `command`. Refused when the
    /// command is empty, no argument holds `{task}`, or `name` is `keel` (keel's own runner
    /// cannot be replaced).
    pub fn with(mut self, name: &str, command: Vec<String>) -> Result<Self, TaskError> {
        if name == DEFAULT_RUNNER {
            return Err(TaskError::Refused(format!(
                "runner `{name}` is keel's own and cannot be replaced: give yours another name"
            )));
        }
        if command
            .first()
            .is_none_or(|program| program.trim().is_empty())
        {
            return Err(TaskError::Refused(format!(
                "runner `{name}` has an empty command: give the program and its arguments, \
                 e.g. [\"claude\", \"-p\", \"{{task}}\"]"
            )));
        }
        if !command.iter().any(|arg| arg.contains("{task}")) {
            return Err(TaskError::Refused(format!(
                "runner `{name}` never passes the task: put \"{{task}}\" where the task's text \
                 goes, e.g. [\"codex\", \"exec\", \"{{task}}\"]"
            )));
        }
        self.templates.insert(name.to_owned(), command);
        Ok(self)
    }

    /// The runners' names.
    pub fn names(&self) -> Vec<&str> {
        self.templates.keys().map(String::as_str).collect()
    }

    /// Whether there is a runner `name`.
    pub fn has(&self, name: &str) -> bool {
        self.templates.contains_key(name)
    }

    /// The argument template of runner `name`.
    pub fn template(&self, name: &str) -> Result<&[String], TaskError> {
        self.templates.get(name).map(Vec::as_slice).ok_or_else(|| {
            TaskError::Refused(format!(
                "no runner `{name}`; known: {} (add one as [tasks.runners.{name}] in the config)",
                self.names().join(", ")
            ))
        })
    }

    /// The command line of runner `name` for `task` in `workdir`.
    pub fn command(
        &self,
        name: &str,
        task: &str,
        workdir: &Path,
    ) -> Result<Vec<String>, TaskError> {
        Ok(expand(self.template(name)?, task, workdir))
    }
}

/// The command line `template` stands for, for `task` in `workdir`: `{workdir}` and `{task}`
/// filled in, the task always within its own argument.
pub(crate) fn expand(template: &[String], task: &str, workdir: &Path) -> Vec<String> {
    let workdir = workdir.display().to_string();
    template
        .iter()
        .map(|arg| arg.replace("{workdir}", &workdir).replace("{task}", task))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_take_the_task_as_one_argument() {
        let runners = Runners::new(Path::new("/bin/keel"))
            .with(
                "claude",
                vec!["claude".into(), "-p".into(), "{task}".into()],
            )
            .unwrap();
        assert_eq!(
            runners
                .command("keel", "fix it; rm -rf /", Path::new("/w"))
                .unwrap(),
            [
                "/bin/keel",
                "exec",
                "--output-format",
                "json",
                "-C",
                "/w",
                "fix it; rm -rf /"
            ]
        );
        assert_eq!(
            runners
                .command("claude", "a \"b\" $c", Path::new("/w"))
                .unwrap(),
            ["claude", "-p", "a \"b\" $c"]
        );
        assert_eq!(runners.names(), ["claude", "keel"]);
        let err = runners.command("codex", "x", Path::new("/w")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("no runner `codex`; known: claude, keel")
        );
        assert!(Runners::new(Path::new("k")).with("x", vec![]).is_err());
        assert!(
            Runners::new(Path::new("k"))
                .with("x", vec!["echo".into()])
                .is_err()
        );
        let keel = Runners::new(Path::new("k"))
            .with("keel", vec!["sh".into(), "-c".into(), "{task}".into()])
            .unwrap_err();
        assert_eq!(
            keel.to_string(),
            "runner `keel` is keel's own and cannot be replaced: give yours another name"
        );
    }
}
