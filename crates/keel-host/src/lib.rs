//! # keel-host
//!
//! The session host every keel front end shares.

#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod acp;
pub mod approver;
mod configured;
mod error;
mod events;
mod host;
mod hub;
mod live;
pub mod render;
pub mod report;
pub mod rewind;
pub mod sdk;
pub mod stream_json;
pub mod totals;
pub mod trouble;

pub use approver::{ModeApprover, ModeSwitch, approval_question};
pub use configured::ConfiguredSessions;
pub use error::HostError;
pub use events::{Answer, AnsweredBy, HostEvent, Question, QuestionKind, Role, SubscriberId};
pub use host::{
    Opened, Opening, Ownership, SessionFactory, SessionHost, SessionParts, SessionSummary,
};
pub use hub::{Answers, HostOptions, QuestionWait, Subscription};
pub use live::{LiveSession, TaskWait, Turn};
pub use totals::Totals;
