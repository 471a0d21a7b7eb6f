//! The project's context read ahead: what the system prompt says of the project (instruction
//! files, the repository's state, the date) read on a thread of its own from the moment a host
//! knows its working directory, before it has everything else the builder needs.

use std::path::{Path, PathBuf};

use keel_engine::ProjectContext;

use crate::beside::Beside;

/// Waits for the reading and gives its result.
type Wait = Box<dyn FnOnce() -> ProjectContext + Send>;

/// The context of the project a session working in one directory belongs to, being read
/// beside the caller. [`CodingAgentBuilder::build`](crate::CodingAgentBuilder::build) starts
/// one itself; a host that knows the directory earlier (the `keel` command, before it parses
/// its flags and reads its config) starts it with [`ProjectReading::start`] and hands it to
/// [`CodingAgentBuilder::project_reading`](crate::CodingAgentBuilder::project_reading). The
/// builder uses it only for the same directory, so a reading can never tell a session about
/// another project.
pub struct ProjectReading {
    /// The working directory, canonical.
    cwd: PathBuf,
    /// The project's root: the repository's work tree holding `cwd`, else `cwd`.
    root: PathBuf,
    wait: Wait,
}

impl ProjectReading {
    /// Starts reading the context of the project `cwd` belongs to; `None` when `cwd` cannot
    /// be resolved (the builder then says why).
    pub fn start(cwd: &Path) -> Option<Self> {
        std::fs::canonicalize(cwd).ok().map(Self::of_canonical)
    }

    /// Starts reading for `cwd`, already canonical (the builder's).
    pub(crate) fn of_canonical(cwd: PathBuf) -> Self {
        let root = keel_agents::project_root(&cwd);
        let reading = Beside::start("keel-context", {
            let (root, cwd) = (root.clone(), cwd.clone());
            move || keel_agents::project_context(&root, &cwd)
        });
        Self {
            cwd,
            root,
            wait: Box::new(move || reading.wait()),
        }
    }

    /// The canonical working directory it reads for.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// The project's root (see [`keel_agents::project_root`]).
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The context, once read.
    pub(crate) fn wait(self) -> ProjectContext {
        (self.wait)()
    }
}

impl std::fmt::Debug for ProjectReading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProjectReading")
            .field("cwd", &self.cwd)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}
