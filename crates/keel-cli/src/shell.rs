//! Shell integration: `keel completions SHELL` (clap_complete) and `keel man` (clap_mangen),
//! both printed on stdout from the command line's own definition, so they never drift from it.

use std::io::Write;

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;
use crate::setup::CliError;

/// Prints the completion script for `shell`; returns the exit code.
pub(crate) fn completions(shell: Shell) -> Result<u8, CliError> {
    let mut command = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, "keel", &mut out);
    print(&out)
}

/// Prints the manual page, roff for `man`; returns the exit code.
pub(crate) fn man() -> Result<u8, CliError> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .title("KEEL")
        .render(&mut out)
        .map_err(|err| CliError::Run(format!("cannot render the man page: {err}")))?;
    print(&out)
}

/// Writes `bytes` to stdout; a closed stdout (`| head`) is not an error.
fn print(bytes: &[u8]) -> Result<u8, CliError> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(CliError::Run(format!("cannot write to stdout: {err}")))
        }
        _ => Ok(0),
    }
}
