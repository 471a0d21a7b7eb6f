//! Who decides whether a gated tool call may run.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use keel_tool::Effect;
use serde_json::Value;

/// A call waiting for approval.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// The call's id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// Its arguments.
    pub input: Value,
    /// What it would do.
    pub effect: Effect,
    /// Why it needs approval, for the person asked.
    pub reason: String,
}

/// An approver's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run this call.
    Allow,
    /// Run this call, and every later call of this tool in the session, without asking.
    AllowAlways,
    /// Do not run it; the model is told `denied: <reason>`.
    Deny(String),
}

/// Decides gated calls, and whether a run may go on past its iteration warning.
#[async_trait::async_trait]
pub trait Approver: Send + Sync {
    /// Whether the call may run.
    async fn approve(&self, request: &ApprovalRequest) -> Decision;

    /// Asked once when a run reaches 80 % of its iteration limit; `false` ends it with
    /// `MaxIterations`. Default: go on.
    async fn continue_after_warning(&self, _used: u32, _limit: u32) -> bool {
        true
    }
}

/// A shared approver approves as the one it holds: a host hands the same approver to an agent
/// and to the sub-agents it spawns.
#[async_trait::async_trait]
impl<A: Approver + ?Sized> Approver for Arc<A> {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        (**self).approve(request).await
    }

    async fn continue_after_warning(&self, used: u32, limit: u32) -> bool {
        (**self).continue_after_warning(used, limit).await
    }
}

/// Allows everything (`--approvals allow`, `-y`).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

#[async_trait::async_trait]
impl Approver for AllowAll {
    async fn approve(&self, _request: &ApprovalRequest) -> Decision {
        Decision::Allow
    }
}

/// The headless default: gated calls are refused and the model is told why; the run uses its
/// whole iteration budget.
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyGated;

#[async_trait::async_trait]
impl Approver for DenyGated {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        Decision::Deny(format!(
            "{} ({}); this session runs without a person to approve it, so do it another way \
             or leave it to the user",
            request.reason, "destructive actions need approval"
        ))
    }
}

type ApproveFn =
    dyn Fn(ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send>> + Send + Sync;

/// An approver made of a callback, e.g. a prompt in the CLI.
#[derive(Clone)]
pub struct CallbackApprover {
    approve: Arc<ApproveFn>,
}

impl std::fmt::Debug for CallbackApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallbackApprover").finish_non_exhaustive()
    }
}

impl CallbackApprover {
    /// Asks `approve` for each gated call.
    pub fn new<F, Fut>(approve: F) -> Self
    where
        F: Fn(ApprovalRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Decision> + Send + 'static,
    {
        Self {
            approve: Arc::new(move |request| Box::pin(approve(request))),
        }
    }
}

#[async_trait::async_trait]
impl Approver for CallbackApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        (self.approve)(request.clone()).await
    }
}
