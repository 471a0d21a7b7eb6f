//! The journal: what the session writes to its log, write-ahead, and how failures to write
//! are kept.

use keel_provider::{ContentBlock, Message, Role};
use keel_tool::ToolOutput;

use super::{OwnedCall, Session};
use crate::history::canonicalize;
use crate::session_store::{SessionError, SessionRecord};

impl Session {
    /// Writes `record` to the session log, if any.
    pub(super) fn write_record(&self, record: &SessionRecord) -> Result<(), SessionError> {
        let Some(log) = &self.log else {
            return Ok(());
        };
        let mut log = log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        log.append(record)
    }

    pub(super) fn log_record(&mut self, record: &SessionRecord) {
        if let Err(err) = self.write_record(record) {
            self.note_persist_error(err.to_string());
        }
    }

    pub(super) fn note_persist_error(&mut self, error: String) {
        tracing::warn!(session = %self.id, "session not saved: {error}");
        if self.persist_error.is_none() {
            self.persist_error = Some(error);
        }
    }

    /// Makes what was written durable (the end of a turn).
    pub(super) fn sync(&mut self) {
        let result = match self.log.as_mut() {
            Some(log) => log
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .flush(),
            None => return,
        };
        if let Err(err) = result {
            self.note_persist_error(err.to_string());
        }
    }

    /// Puts the history in canonical form; a change (none is expected in a live session) is
    /// written as the whole history, so the file replays to exactly what is in memory.
    pub(super) fn canonicalize_history(&mut self) {
        let fixes = canonicalize(&mut self.history);
        if fixes > 0 {
            tracing::warn!(session = %self.id, fixes, "the history needed repairs");
            if self.log.is_some() {
                let record = SessionRecord::Compacted {
                    messages: self.history.clone(),
                    before_tokens: 0,
                    after_tokens: 0,
                };
                self.log_record(&record);
            }
        }
    }

    /// Writes `message` to the log, then adds it to the history: a user message right after
    /// another is merged into it (replay merges the same way), so roles always alternate.
    pub(super) fn append(&mut self, message: Message) {
        self.log_record(&SessionRecord::message(message.clone()));
        match self.history.last_mut() {
            Some(last) if last.role == Role::User && message.role == Role::User => {
                last.content.extend(message.content);
            }
            _ => self.history.push(message),
        }
    }

    /// Writes `call`'s result to the session log; the error, if any, as text.
    pub(super) fn write_result(&self, call: &OwnedCall, output: &ToolOutput) -> Option<String> {
        let record = SessionRecord::ToolResult {
            result: result_block(call, output),
        };
        self.write_record(&record).err().map(|err| err.to_string())
    }
}

/// The `tool_result` block answering `call`.
pub(super) fn result_block(call: &OwnedCall, output: &ToolOutput) -> ContentBlock {
    ContentBlock::tool_result_with_images(
        &call.id,
        output.content.clone(),
        output.is_error,
        output.images.clone(),
    )
}
