//! Notices from outside the conversation (a background task finished, a file changed), added
//! to the conversation before the next model request.

/// Hands a session the notices waiting for it.
#[async_trait::async_trait]
pub trait Notifier: Send + Sync {
    /// The notices for session `session_id` not delivered yet. Each notice is returned once:
    /// the notifier marks what it returns as delivered.
    async fn take(&self, session_id: &str) -> Vec<String>;
}
