//! The interactive session (being written).

use crate::cli::Options;
use crate::setup::{CliError, SessionChoice};

/// Runs the interactive session; returns the exit code.
pub async fn run(_options: &Options, _choice: SessionChoice) -> Result<u8, CliError> {
    Err(CliError::Usage("the interactive session is not written yet".into()))
}
