//! `keel rewind [ID] [--conversation]`: the workspace's snapshots, or the files (and the
//! conversation) put back as they were at one of them (keel-host's [`rewind`] module).

use std::path::{Path, PathBuf};

use keel::engine::SessionStore;
use keel::snapshot::SnapshotInfo;
use keel_config::keel_home;
use keel_host::rewind::{Rewound, list_lines, list_or_restore, open, report_lines};

use crate::cli::Options;
use crate::error::CliError;

/// The workspace `keel rewind` works on: `-C`, else the current directory.
fn workspace(options: &Options) -> Result<PathBuf, CliError> {
    Ok(keel_config::existing_dir(
        &keel_config::given_dir(&options.overrides())?,
        "-C",
    )?)
}

/// `keel rewind [ID] [--conversation]`.
pub(crate) fn command(
    options: &Options,
    id: Option<String>,
    conversation: bool,
) -> Result<u8, CliError> {
    let home = keel_home()?;
    let workspace = workspace(options)?;
    let config = keel_config::load_config(&options.overrides(), &home, &workspace)?;
    let snapshots = open(&home, &workspace, &config.snapshots).map_err(CliError::Run)?;
    if id.is_none() && conversation {
        return Err(CliError::Usage(
            "--conversation needs a snapshot: keel rewind ID --conversation".into(),
        ));
    }
    match list_or_restore(&snapshots, id.as_deref(), |_, _| Ok(()))? {
        Rewound::Listed(infos) => {
            if infos.is_empty() {
                println!(
                    "no snapshots of {} yet; keel takes one before every call that may change \
                     files",
                    workspace.display()
                );
            }
            for line in list_lines(&infos) {
                println!("{line}");
            }
        }
        Rewound::Restored(restored) => {
            let (info, report) = *restored;
            for line in report_lines(&info, &report) {
                println!("{line}");
            }
            if conversation {
                println!("{}", rewind_conversation(&home, &info)?);
            }
        }
    }
    Ok(0)
}

/// Cuts the session that took `info` back to where that call's run began.
fn rewind_conversation(home: &Path, info: &SnapshotInfo) -> Result<String, CliError> {
    let session = &info.point.session_id;
    if session.is_empty() {
        return Err(CliError::Usage(
            "that snapshot was not taken during a session, so there is no conversation to rewind"
                .into(),
        ));
    }
    keel_config::session_store(home)
        .rewind(session, info.point.history_len)
        .map_err(|err| CliError::Run(format!("cannot rewind the conversation: {err}")))?;
    Ok(format!(
        "rewound session {session} to its first {} messages (`keel resume {session}` goes on \
         from there)",
        info.point.history_len
    ))
}
