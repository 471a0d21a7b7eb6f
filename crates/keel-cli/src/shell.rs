//! Shell integration: `keel completions SHELL` (clap_complete) and `keel man` (clap_mangen),
//! both printed on stdout from the command line's own definition, so they never drift from it.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;
use crate::error::CliError;

/// Prints the completion script for `shell`; returns the exit code.
pub(crate) fn completions(shell: Shell) -> Result<u8, CliError> {
    // The subcommands are deferred (built when used), so the tree of the `help` subcommand,
    // which clap copies from them before building them, would miss `keel help tasks show`:
    // the command is built once, and its built subcommands given to a fresh one.
    let mut built = Cli::command();
    built.build();
    let mut command = Cli::command().mut_subcommands(|sub| {
        built
            .find_subcommand(sub.get_name())
            .cloned()
            .unwrap_or(sub)
    });
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, "keel", &mut out);
    print(&out)
}

/// Prints keel's manual page (roff, for `man`), or with `dir` writes it and one page per
/// subcommand there (the pages its SUBCOMMANDS section names), listing the files written;
/// returns the exit code.
pub(crate) fn man(dir: Option<&Path>) -> Result<u8, CliError> {
    let mut command = Cli::command().disable_help_subcommand(true);
    command.build();
    let Some(dir) = dir else {
        let mut out = Vec::new();
        page(command)
            .render(&mut out)
            .map_err(|err| CliError::Run(format!("cannot render the man page: {err}")))?;
        return print(&out);
    };
    std::fs::create_dir_all(dir)
        .map_err(|err| CliError::Usage(format!("--dir {}: {err}", dir.display())))?;
    let mut written = Vec::new();
    write_pages(command, dir, &mut written).map_err(|err| {
        CliError::Run(format!("writing the man pages to {}: {err}", dir.display()))
    })?;
    let list: String = written
        .iter()
        .map(|path| format!("{}\n", path.display()))
        .collect();
    print(list.as_bytes())
}

/// `command`'s page, titled by its name in capitals (`KEEL`, `KEEL-EXEC`).
fn page(command: clap::Command) -> clap_mangen::Man {
    let title = command
        .get_display_name()
        .unwrap_or_else(|| command.get_name())
        .to_uppercase();
    clap_mangen::Man::new(command).title(title)
}

/// Writes `command`'s page and its visible subcommands' into `dir`, adding each file to
/// `written`.
fn write_pages(
    command: clap::Command,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        write_pages(sub.clone(), dir, written)?;
    }
    written.push(page(command).generate_to(dir)?);
    Ok(())
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
