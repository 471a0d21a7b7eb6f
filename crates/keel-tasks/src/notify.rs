//! Telling a session its tasks ended: before its next model request, exactly once.

use std::sync::Arc;

use keel_engine::Notifier;

use crate::{TaskRecord, TaskStatus, TaskStore};

/// The notice for an ended task: `Task <id> completed (exit <code>) in <duration>. Summary: …
/// Log: <path>`.
pub fn notice(record: &TaskRecord) -> String {
    let took = match (&record.started_at, &record.completed_at) {
        (Some(start), Some(end)) => duration_between(start, end),
        _ => None,
    };
    let how = match (record.status, record.exit_code) {
        (TaskStatus::Completed | TaskStatus::Failed, Some(code)) => {
            format!("{} (exit {code})", record.status)
        }
        (TaskStatus::TimedOut, _) => format!("timed out (after {} s)", record.timeout_secs),
        (status, _) => status.to_string(),
    };
    let mut text = format!("Task {} {how}", record.id);
    if let Some(took) = took {
        text.push_str(&format!(" in {took}"));
    }
    text.push('.');
    if let Some(summary) = &record.result_summary {
        text.push_str(&format!(" Summary: {summary}"));
    } else if let Some(note) = &record.note {
        text.push_str(&format!(" {note}."));
    }
    if record.status == TaskStatus::Failed && !record.error_tail.trim().is_empty() {
        let last: Vec<&str> = record.error_tail.lines().rev().take(5).collect();
        let last: Vec<&str> = last.into_iter().rev().collect();
        text.push_str(&format!(" Errors: {}", last.join(" | ")));
    }
    text.push_str(&format!(" Log: {}", record.output_path.display()));
    text
}

/// `2 min 5 s` between two RFC 3339 times.
fn duration_between(start: &str, end: &str) -> Option<String> {
    let start: jiff::Timestamp = start.parse().ok()?;
    let end: jiff::Timestamp = end.parse().ok()?;
    let secs = end.duration_since(start).as_secs().max(0);
    Some(if secs < 60 {
        format!("{secs} s")
    } else if secs < 3600 {
        format!("{} min {} s", secs / 60, secs % 60)
    } else {
        format!("{} h {} min", secs / 3600, (secs % 3600) / 60)
    })
}

/// Hands a session the notices of its ended tasks (a [`Notifier`] for the agent).
#[derive(Debug, Clone)]
pub struct TaskNotifier {
    store: Arc<dyn TaskStore>,
}

impl TaskNotifier {
    /// Notices from `store`.
    pub fn new(store: Arc<dyn TaskStore>) -> Self {
        Self { store }
    }
}

#[async_trait::async_trait]
impl Notifier for TaskNotifier {
    async fn take(&self, session_id: &str) -> Vec<String> {
        match self.store.take_unnotified(session_id) {
            Ok(records) => records.iter().map(notice).collect(),
            Err(err) => {
                tracing::warn!("cannot read finished tasks: {err}");
                Vec::new()
            }
        }
    }
}
