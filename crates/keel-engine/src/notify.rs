//! Notices from outside the conversation (a background task finished, a file changed), added
//! to the conversation before the next model request.

/// Hands a session the notices waiting for it. A session asks before each model request but
/// the first of a new session ([`Agent::session`](crate::Agent::session)): what a notifier
/// reports comes from work the session started, and before its first request it started
/// none. A resumed session asks before its first request too.
#[async_trait::async_trait]
pub trait Notifier: Send + Sync {
    /// The notices for session `session_id` not delivered yet. Each notice is returned once:
    /// the notifier marks what it returns as delivered.
    async fn take(&self, session_id: &str) -> Vec<String>;
}
