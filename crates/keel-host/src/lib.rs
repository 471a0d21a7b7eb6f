//! # keel-host
//!
//! The session host every keel front end shares — a terminal, `keel exec`, the Claude Agent
//! SDKs' stream-json, an editor over ACP, a browser — and any Rust host that wants what they
//! share: several live sessions at once, their events fanned out to any number of
//! subscribers, their approval questions answered from wherever someone can answer.
//!
//! - [`SessionHost`] owns the live sessions of a process: it opens them through a front
//!   end's [`SessionFactory`] ([`ConfiguredSessions`] builds them from keel-config's
//!   resolved settings), resumes, forks, lists and closes them.
//! - A [`LiveSession`] runs one turn at a time; every [`Subscription`] sees the turn's
//!   [`HostEvent`]s in order. The owner's subscription never drops an event; any other that
//!   falls behind is dropped with a notice and never holds up the turn; a late one gets the
//!   current turn so far.
//! - Approval questions are brokered: only an [`Answerer`](Role::Answerer) answers, the first
//!   answer wins and everyone sees it, a protected call is answered only by the owner, and an
//!   unanswered question waits as long as the owner said ([`QuestionWait`]).
//! - The mappings every front end shares, each written once: [`stream_json`] (Claude Code's
//!   stream-json lines), [`acp`] (ACP session updates, the client's permission questions and
//!   files), [`sdk`] (the SDKs' control protocol), and [`report`] (a session's status as
//!   lines).
//!
//! ```
//! use std::sync::Arc;
//! use keel::CodingAgent;
//! use keel::prelude::async_trait;
//! use keel::provider::ContentBlock;
//! use keel_host::{
//!     Answers, HostError, HostEvent, ModeApprover, Opening, Ownership, Role, SessionFactory,
//!     SessionHost, SessionParts, TaskWait,
//! };
//! use keel_test_support::scripted::ScriptedProvider;
//!
//! /// Sessions of an agent on a scripted model (use a real provider for real).
//! struct Scripted(tempfile::TempDir);
//!
//! #[async_trait]
//! impl SessionFactory for Scripted {
//!     async fn open(&self, _: &Opening, answers: Answers) -> Result<SessionParts, HostError> {
//!         let approver = ModeApprover::starting(keel_config::LiveMode::Ask, Some(Arc::new(answers)));
//!         let mode = approver.switch();
//!         let failed = |err: keel::BuildError| HostError::Failed(err.to_string());
//!         let coding = CodingAgent::builder(Arc::new(ScriptedProvider::new().then_text("Hello.")))
//!             .cwd(self.0.path())
//!             .home(self.0.path())
//!             .approver(approver)
//!             .build()
//!             .map_err(failed)?;
//!         let session = coding.session().map_err(failed)?;
//!         Ok(SessionParts { coding, session, mode })
//!     }
//! }
//!
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! let host = SessionHost::default();
//! let factory = Scripted(tempfile::tempdir()?);
//! let opened = host.open(&factory, &Opening::New { cwd: None }, Ownership::default()).await?;
//! // A second front end (a browser, say) watches the same session.
//! let mut watcher = opened.session.subscribe(Role::Watcher);
//! let outcome = opened
//!     .session
//!     .run_turn(vec![ContentBlock::text("Say hello")], TaskWait::Leave)
//!     .await?
//!     .ok_or("no outcome")?;
//! assert_eq!(outcome.text, "Hello.");
//! assert!(matches!(watcher.next().await, Some(HostEvent::TurnStarted { turn: 1 })));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

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

/// The crate README's example, compiled as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctest;
