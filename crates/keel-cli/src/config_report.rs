//! `keel config`: every effective setting and where it came from (keel-config's
//! [`report`](keel_config::report)).

use keel_config::{SessionChoice, Surface};

use crate::cli::Options;
use crate::error::CliError;
use crate::print::print_line;

/// `keel config`.
pub(crate) fn run(options: &Options) -> Result<u8, CliError> {
    let setup = options.settings(Surface::Listing, &SessionChoice::New)?;
    for line in keel_config::report::report(&options.overrides(), &setup) {
        print_line(&line);
    }
    Ok(0)
}
