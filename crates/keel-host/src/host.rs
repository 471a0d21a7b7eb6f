//! The session host: the live sessions of one process, opened through a front end's
//! [`SessionFactory`], listed, found by id, closed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use keel::CodingAgent;
use keel::engine::{HookReport, Session, SessionEndReason};

use crate::HostError;
use crate::approver::ModeSwitch;
use crate::events::Role;
use crate::hub::{Answers, HostOptions, Hub, QuestionWait, Subscription};
use crate::live::LiveSession;

/// Which session to open.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Opening {
    /// A new session in `cwd` (the front end's own directory when `None`).
    New {
        /// The working directory.
        cwd: Option<PathBuf>,
    },
    /// The saved session with this id, where it started.
    Resume {
        /// Its id.
        id: String,
    },
    /// A new session that starts with the history of the saved session `id`.
    Fork {
        /// The session forked.
        id: String,
    },
    /// The newest saved session of `cwd`.
    Latest {
        /// The working directory.
        cwd: Option<PathBuf>,
    },
}

/// What a [`SessionFactory`] made: the agent, its session, and the switch of the approval
/// mode its approver is in.
pub struct SessionParts {
    /// The agent, built with a [`ModeApprover`](crate::ModeApprover) over the
    /// [`Answers`] the factory was given.
    pub coding: CodingAgent,
    /// The engine's session.
    pub session: Session,
    /// The approver's mode switch.
    pub mode: ModeSwitch,
}

/// How a front end makes a session's agent: its settings (flags, config files, trust), its
/// hooks and the MCP servers it adds, with `answers` behind the approver (wrap it in a
/// [`ModeApprover`](crate::ModeApprover) in the mode the settings say).
#[async_trait::async_trait]
pub trait SessionFactory: Send + Sync {
    /// The agent and session `opening` names.
    async fn open(&self, opening: &Opening, answers: Answers) -> Result<SessionParts, HostError>;
}

/// How the owning front end holds a session it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ownership {
    /// How long an unanswered question waits.
    pub wait: QuestionWait,
    /// [`Role::Answerer`] when the owner answers questions itself
    /// ([`LiveSession::answer`]); [`Role::Watcher`] (the default) when it answers none, or
    /// only through an approver it attaches later ([`LiveSession::answer_with`]). With no
    /// answerer, a gated call is refused as a headless run refuses it.
    pub role: Role,
}

impl Default for Ownership {
    fn default() -> Self {
        Self {
            wait: QuestionWait::Forever,
            role: Role::Watcher,
        }
    }
}

/// A session just opened: its handle, and the owner's subscription (the only one that may
/// answer a protected call's question).
#[derive(Debug)]
pub struct Opened {
    /// The live session.
    pub session: LiveSession,
    /// The owner's subscription: events from the start, questions to answer.
    pub owner: Subscription,
}

/// One live session, as [`SessionHost::list`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    /// The session's id.
    pub id: String,
    /// Its working directory.
    pub cwd: PathBuf,
    /// Its model now.
    pub model: String,
    /// Whether a turn is running.
    pub busy: bool,
    /// How many subscribers it has.
    pub subscribers: usize,
}

/// The live sessions of one process, shared by every front end in it (a terminal, a browser,
/// an editor). Cheap to clone; every clone is the same host.
#[derive(Clone, Default)]
pub struct SessionHost {
    inner: Arc<HostInner>,
}

#[derive(Default)]
struct HostInner {
    options: HostOptions,
    sessions: Mutex<BTreeMap<String, LiveSession>>,
}

impl std::fmt::Debug for SessionHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHost")
            .field("sessions", &self.ids())
            .finish_non_exhaustive()
    }
}

impl SessionHost {
    /// A host with no sessions, buffering and replaying as `options` say.
    pub fn new(options: HostOptions) -> Self {
        Self {
            inner: Arc::new(HostInner {
                options,
                sessions: Mutex::default(),
            }),
        }
    }

    /// Opens the session `opening` names through `factory`, owned by the caller: the
    /// returned [`Opened::owner`] is its subscription.
    pub async fn open(
        &self,
        factory: &dyn SessionFactory,
        opening: &Opening,
        ownership: Ownership,
    ) -> Result<Opened, HostError> {
        let hub = Hub::new(self.inner.options, ownership.wait);
        let parts = factory.open(opening, Answers::new(hub.clone())).await?;
        let session = LiveSession::new(parts.coding, parts.session, parts.mode, hub);
        let owner = session.subscribe_owner(ownership.role);
        self.inner
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(session.id(), session.clone());
        Ok(Opened { session, owner })
    }

    /// Moves live session `live` to `session` (a new conversation of the same agent — a
    /// REPL's `/clear` — or a saved one resumed), between turns: its subscribers stay and
    /// are told the new id. Returns the previous engine session (end it first, for its
    /// `SessionEnd` hooks).
    pub async fn switch(&self, live: &LiveSession, session: Session) -> Result<Session, HostError> {
        let (old_id, previous) = live.switch_to(session).await?;
        let mut sessions = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        sessions.remove(&old_id);
        sessions.insert(live.id(), live.clone());
        Ok(previous)
    }

    /// The live session `id`.
    pub fn get(&self, id: &str) -> Result<LiveSession, HostError> {
        self.inner
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()
            .ok_or_else(|| HostError::NoSession(id.to_owned()))
    }

    /// The ids of the live sessions, in order.
    pub fn ids(&self) -> Vec<String> {
        self.inner
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    /// The live sessions, by id.
    pub async fn list(&self) -> Vec<SessionSummary> {
        let sessions: Vec<LiveSession> = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        let mut summaries = Vec::with_capacity(sessions.len());
        for live in sessions {
            let model = match live.inner.session.try_lock() {
                Ok(session) => session.model().to_owned(),
                Err(_) => live.coding().model().to_owned(),
            };
            summaries.push(SessionSummary {
                id: live.id(),
                cwd: live.cwd().to_path_buf(),
                model,
                busy: live.is_busy(),
                subscribers: live.subscribers(),
            });
        }
        summaries
    }

    /// The live sessions other than `id` working in `workspace`.
    pub(crate) fn neighbours(&self, id: &str, workspace: &Path) -> Vec<LiveSession> {
        self.inner
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|live| live.id() != id && live.cwd() == workspace)
            .cloned()
            .collect()
    }

    /// Closes session `id`: its running turn cancelled, its `SessionEnd` hooks run with
    /// `reason`, every subscriber told; what the hooks reported.
    pub async fn close(&self, id: &str, reason: SessionEndReason) -> Result<HookReport, HostError> {
        let live = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id)
            .ok_or_else(|| HostError::NoSession(id.to_owned()))?;
        live.cancel();
        let report = live.session().await.end(reason).await;
        live.inner.hub.close();
        Ok(report)
    }
}
