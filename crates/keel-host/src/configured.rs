//! The session factory of a front end that resolved its [`Settings`] (flags, environment,
//! config files and trust) once: every session it opens is the agent those settings build,
//! in the settings' working directory.

use std::sync::Arc;

use keel::engine::{Approver, Hooks};
use keel_config::{LiveMode, SessionChoice, Settings};

use crate::HostError;
use crate::approver::{ModeApprover, ModeSwitch};
use crate::host::{Opening, SessionFactory, SessionParts};
use crate::hub::Answers;

/// Opens sessions with the agent `settings` build, its questions going to the host's
/// answerers.
pub struct ConfiguredSessions {
    settings: Arc<Settings>,
    mode: ModeSwitch,
    asks_about_changes: bool,
    local_hooks: Hooks,
}

impl std::fmt::Debug for ConfiguredSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfiguredSessions")
            .field("cwd", &self.settings.cwd)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl ConfiguredSessions {
    /// Sessions of the agent `settings` build, starting in the settings' approval mode.
    pub fn new(settings: Arc<Settings>) -> Self {
        let mode = ModeSwitch::new(settings.live_mode);
        Self {
            settings,
            mode,
            asks_about_changes: false,
            local_hooks: Hooks::new(),
        }
    }

    /// Starting in `mode` instead.
    pub fn mode(mut self, mode: LiveMode) -> Self {
        self.mode = ModeSwitch::new(mode);
        self
    }

    /// In the mode `switch` holds, shared with whoever else reads or changes it (a program's
    /// hooks and its `set_permission_mode`). Every session opened shares it.
    pub fn mode_switch(mut self, switch: ModeSwitch) -> Self {
        self.mode = switch;
        self
    }

    /// Asking about every change in `ask` mode, and about every change but a file edit in
    /// `accept-edits`, as Claude Code's `default` and `acceptEdits` modes do (for a program
    /// that answers through the Claude Agent SDKs).
    pub fn asking_about_changes(mut self) -> Self {
        self.asks_about_changes = true;
        self
    }

    /// With `hooks` watching the main agent alone (a terminal's diffs, a program's hooks).
    pub fn local_hooks(mut self, hooks: Hooks) -> Self {
        self.local_hooks = hooks;
        self
    }

    /// The settings the sessions are built from.
    pub fn settings(&self) -> &Arc<Settings> {
        &self.settings
    }
}

#[async_trait::async_trait]
impl SessionFactory for ConfiguredSessions {
    async fn open(&self, opening: &Opening, answers: Answers) -> Result<SessionParts, HostError> {
        let settings = &self.settings;
        let elsewhere = match opening {
            Opening::New { cwd: Some(cwd) } | Opening::Latest { cwd: Some(cwd) } => {
                std::fs::canonicalize(cwd).ok().as_deref() != Some(settings.cwd.as_path())
            }
            _ => false,
        };
        if elsewhere {
            return Err(HostError::Invalid(format!(
                "these settings open sessions in {} only",
                settings.cwd.display()
            )));
        }
        let mut approver = ModeApprover::switched_by(
            self.mode.clone(),
            Some(Arc::new(answers) as Arc<dyn Approver>),
        );
        if self.asks_about_changes {
            approver = approver.asking_about_changes();
        }
        let mode = approver.switch();
        let coding = settings.agent(approver, self.local_hooks.clone())?;
        let session = match opening {
            Opening::Fork { id } => coding
                .agent()
                .fork(id, settings.extras.session_id.as_deref())
                .map_err(|err| HostError::Invalid(format!("cannot fork: {err}")))?,
            Opening::Resume { id } => {
                settings.session(coding.agent(), &SessionChoice::Resume(id.clone()))?
            }
            Opening::Latest { .. } => settings.session(coding.agent(), &SessionChoice::Latest)?,
            Opening::New { .. } => settings.session(coding.agent(), &SessionChoice::New)?,
        };
        Ok(SessionParts {
            coding,
            session,
            mode,
        })
    }
}

impl Opening {
    /// The opening `choice` names, in the settings' working directory.
    pub fn of(choice: &SessionChoice) -> Self {
        match choice {
            SessionChoice::New => Self::New { cwd: None },
            SessionChoice::Resume(id) => Self::Resume { id: id.clone() },
            SessionChoice::Latest => Self::Latest { cwd: None },
        }
    }
}
