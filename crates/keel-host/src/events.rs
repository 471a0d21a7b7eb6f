//! What a live session tells its subscribers: its turns and their events, the approval
//! questions and their answers, mode changes, and notices about subscribers.

use keel::RunEvent;
use keel::engine::{ApprovalRequest, Decision, RunOutcome};
use keel_config::LiveMode;

/// A subscriber of one live session, by number (unique within the session).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubscriberId(pub u64);

impl std::fmt::Display for SubscriberId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "subscriber {}", self.0)
    }
}

/// What a subscriber may do beside watching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Sees every event; answers nothing.
    Watcher,
    /// Sees every event and may answer approval questions (not a protected call's, unless it
    /// is the session's owner).
    Answerer,
}

/// An approval question a live session asks its answerers.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// The question's number, unique within the session: answers name it.
    pub id: u64,
    /// What is asked.
    pub kind: QuestionKind,
}

impl Question {
    /// Whether only the session's owner may answer: a protected call (one that changes keel's
    /// own configuration, hooks, trust, a repository's `.git`).
    pub fn owner_only(&self) -> bool {
        matches!(&self.kind, QuestionKind::Call(request) if request.is_protected())
    }
}

/// What a [`Question`] asks.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum QuestionKind {
    /// Whether a gated tool call may run.
    Call(Box<ApprovalRequest>),
    /// Whether the run may go on past 80 % of its iteration limit.
    ContinuePastWarning {
        /// Model calls made.
        used: u32,
        /// The limit.
        limit: u32,
    },
}

/// The answer to a [`Question`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A gated call's decision.
    Decision(Decision),
    /// Whether the run goes on past its iteration warning.
    Continue(bool),
}

/// Who answered a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnsweredBy {
    /// A subscriber.
    Subscriber(SubscriberId),
    /// Nobody within the owner's wait ([`QuestionWait::DenyAfter`](crate::QuestionWait)):
    /// refused (a call), or let go on (the iteration warning).
    Timeout,
    /// Nobody could answer: no answerer was subscribed, or the last one left.
    NoAnswerer,
}

/// What happens in a live session, in order, as every subscriber sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum HostEvent {
    /// A turn began: a prompt was sent.
    TurnStarted {
        /// The turn's number in this live session (1-based).
        turn: u64,
    },
    /// Something happened in the turn (the engine's events, background tasks waited for).
    Run(RunEvent),
    /// The turn ended.
    TurnEnded {
        /// The turn's number.
        turn: u64,
        /// How it ended; `None` when it ended without an outcome (stopped while waiting for
        /// background tasks before any run finished).
        outcome: Option<RunOutcome>,
    },
    /// An approval question waits for an answerer.
    Question(Question),
    /// A question was answered; every subscriber sees the answer, whoever gave it.
    Answered {
        /// The question.
        question: u64,
        /// The answer.
        answer: Answer,
        /// Who gave it.
        by: AnsweredBy,
    },
    /// A question no longer waits: its turn was cancelled before anyone answered.
    QuestionWithdrawn {
        /// The question.
        question: u64,
    },
    /// The session's approval mode changed.
    ModeChanged {
        /// The mode now.
        mode: LiveMode,
    },
    /// The live session moved to another engine session (a new conversation, or a saved one
    /// resumed): its id now.
    SessionSwitched {
        /// The new id.
        id: String,
    },
    /// Another subscriber was dropped (it fell too far behind).
    SubscriberDropped {
        /// Which.
        subscriber: SubscriberId,
        /// Why.
        reason: String,
    },
    /// The last event a dropped subscriber receives: it fell too far behind, and the session
    /// went on without it. It may subscribe again (and gets the current turn's replay).
    Dropped {
        /// Why.
        reason: String,
    },
    /// The session was closed: no more events.
    Closed,
}

impl HostEvent {
    /// Whether the event belongs to the current turn's replay (a late subscriber's view of
    /// the turn so far).
    pub(crate) fn replayed(&self) -> bool {
        !matches!(
            self,
            Self::SubscriberDropped { .. } | Self::Dropped { .. } | Self::Closed
        )
    }
}
