//! What keel says at start about the tool set and the model's context window, on stderr
//! (keel-host's [`keel_host::report::notes`] words it).

use keel::CodingAgent;
use keel_host::report::notes::{overflow_warning, profile_note};

/// On stderr: the lean tools chosen for a small window, and the first request that would not
/// fit the window (with `prompt`).
pub(crate) fn print_context_notes(coding: &CodingAgent, prompt: &str) {
    if let Some(note) = profile_note(coding) {
        crate::print::progress(&format!("keel: {note}"));
    }
    if let Some(warning) = overflow_warning(coding, prompt) {
        crate::print::progress(&format!("keel: warning: {warning}"));
    }
}
