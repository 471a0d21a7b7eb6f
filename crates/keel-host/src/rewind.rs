//! `keel rewind` and the REPL's `/rewind`: the workspace's snapshots (keel takes one before
//! every call that may change files), and putting the workspace back to one of them.

use std::path::{Path, PathBuf};

use keel_engine::SessionStore;
use keel_snapshot::{RestoreReport, ShadowSnapshots, SnapshotInfo, Snapshots};

use crate::cli::Options;
use crate::config::SnapshotsConfig;
use crate::setup::{CliError, keel_home};

/// The snapshot store of `workspace` with the limits of `config`.
pub(crate) fn open(
    keel_home: &Path,
    workspace: &Path,
    config: &SnapshotsConfig,
) -> Result<ShadowSnapshots, String> {
    ShadowSnapshots::open(
        keel::Home(keel_home).snapshots(),
        workspace,
        config.limits(),
    )
    .map_err(|err| format!("snapshots of {}: {err}", workspace.display()))
}

/// One line per snapshot, oldest first, numbered from 1: number, id, time, session, call,
/// files changed by it and what followed.
pub(crate) fn list_lines(infos: &[SnapshotInfo]) -> Vec<String> {
    infos
        .iter()
        .enumerate()
        .map(|(i, info)| {
            let id: String = info.id.0.chars().take(12).collect();
            let time = info
                .time
                .to_zoned(jiff::tz::TimeZone::system())
                .strftime("%Y-%m-%d %H:%M:%S");
            let session = if info.point.session_id.is_empty() {
                "-".to_owned()
            } else {
                info.point.session_id.chars().take(8).collect()
            };
            let what = format!("{}: {}", info.point.tool, info.point.summary);
            let what: String = what
                .lines()
                .next()
                .unwrap_or_default()
                .chars()
                .take(60)
                .collect();
            let files = match info.changed.len() {
                1 => "1 file changed".to_owned(),
                n => format!("{n} files changed"),
            };
            format!("{:>3}  {id}  {time}  {session:8}  {what}  ({files})", i + 1)
        })
        .collect()
}

/// The snapshot `arg` names among `infos`: its number in the list (`3` or `#3`) or its id
/// (at least 4 hex digits of it).
pub(crate) fn find<'a>(infos: &'a [SnapshotInfo], arg: &str) -> Result<&'a SnapshotInfo, String> {
    let arg = arg.trim();
    let number = arg
        .strip_prefix('#')
        .or((arg.len() < 4).then_some(arg))
        .and_then(|n| n.parse::<usize>().ok());
    if let Some(number) = number {
        return number
            .checked_sub(1)
            .and_then(|i| infos.get(i))
            .ok_or_else(|| {
                format!(
                    "no snapshot number {number}: there are {} (`keel rewind` lists them)",
                    infos.len()
                )
            });
    }
    let lower = arg.to_ascii_lowercase();
    let mut matching = infos.iter().filter(|info| info.id.0.starts_with(&lower));
    match (matching.next(), matching.next()) {
        (Some(found), None) if lower.len() >= 4 => Ok(found),
        (Some(_), Some(_)) => Err(format!(
            "{arg} names more than one snapshot; give more of its id"
        )),
        _ => Err(format!(
            "no snapshot {arg} for this workspace (`keel rewind` lists them)"
        )),
    }
}

/// What a restore did, for a person: a summary line, then one line per file.
pub(crate) fn report_lines(info: &SnapshotInfo, report: &RestoreReport) -> Vec<String> {
    let id: String = info.id.0.chars().take(12).collect();
    let mut lines = Vec::new();
    if report.restored.is_empty() && report.removed.is_empty() {
        lines.push(format!(
            "the workspace is already as it was at snapshot {id}"
        ));
        return lines;
    }
    lines.push(format!(
        "rewound the workspace to snapshot {id}: {} restored, {} removed",
        report.restored.len(),
        report.removed.len()
    ));
    lines.extend(
        report
            .restored
            .iter()
            .map(|p| format!("  restored {}", p.display())),
    );
    lines.extend(
        report
            .removed
            .iter()
            .map(|p| format!("  removed  {}", p.display())),
    );
    if let Some(before) = &report.before {
        let before: String = before.0.chars().take(12).collect();
        lines.push(format!(
            "the workspace as it was just before is snapshot {before} (`keel rewind {before}` \
             undoes this rewind)"
        ));
    }
    lines
}

/// What a rewind did.
pub(crate) enum Rewound {
    /// No snapshot was named: the workspace's snapshots, oldest first (empty: none yet).
    Listed(Vec<SnapshotInfo>),
    /// The files are back as they were at this snapshot: it, and what the restore did.
    Restored(Box<(SnapshotInfo, RestoreReport)>),
}

/// The snapshots of `snapshots`, or with `argument` (a number from the list, or an id) the
/// files put back as they were at that snapshot: `keel rewind`, `/rewind` and ACP's
/// `/rewind`. A snapshot that is not there is a usage error; a store that fails, a run error.
pub(crate) fn list_or_restore(
    snapshots: &impl Snapshots,
    argument: Option<&str>,
) -> Result<Rewound, CliError> {
    let infos = snapshots
        .list()
        .map_err(|err| CliError::Run(format!("cannot list snapshots: {err}")))?;
    let Some(argument) = argument else {
        return Ok(Rewound::Listed(infos));
    };
    let info = find(&infos, argument).map_err(CliError::Usage)?.clone();
    let report = snapshots
        .restore(&info.id.0)
        .map_err(|err| CliError::Run(format!("cannot rewind: {err}")))?;
    Ok(Rewound::Restored(Box::new((info, report))))
}

/// [`list_or_restore`] off the async threads, for a session's snapshot store.
pub(crate) async fn list_or_restore_async(
    snapshots: std::sync::Arc<ShadowSnapshots>,
    argument: Option<String>,
) -> Result<Rewound, CliError> {
    tokio::task::spawn_blocking(move || list_or_restore(snapshots.as_ref(), argument.as_deref()))
        .await
        .map_err(|err| CliError::Run(format!("cannot rewind: {err}")))?
}

/// What a session's `/rewind` says when the workspace has no snapshot yet.
pub(crate) const NO_SNAPSHOTS: &str =
    "no snapshots of this workspace yet; keel takes one before every call that may change files";

/// What a session's `/rewind` says when snapshots are off.
pub(crate) const SNAPSHOTS_OFF: &str =
    "snapshots are off ([snapshots] enabled = false, or the store failed)";

/// The workspace `keel rewind` works on: `-C`, else the current directory.
fn workspace(options: &Options) -> Result<PathBuf, CliError> {
    crate::setup::existing_dir(&crate::setup::given_dir(options)?, "-C")
}

/// `keel rewind [ID] [--conversation]`.
pub(crate) fn command(
    options: &Options,
    id: Option<String>,
    conversation: bool,
) -> Result<u8, CliError> {
    let home = keel_home()?;
    let workspace = workspace(options)?;
    let config = crate::setup::load_config(options, &home, &workspace)?;
    let snapshots = open(&home, &workspace, &config.snapshots).map_err(CliError::Run)?;
    if id.is_none() && conversation {
        return Err(CliError::Usage(
            "--conversation needs a snapshot: keel rewind ID --conversation".into(),
        ));
    }
    match list_or_restore(&snapshots, id.as_deref())? {
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
    crate::setup::session_store(home)
        .rewind(session, info.point.history_len)
        .map_err(|err| CliError::Run(format!("cannot rewind the conversation: {err}")))?;
    Ok(format!(
        "rewound session {session} to its first {} messages (`keel resume {session}` goes on \
         from there)",
        info.point.history_len
    ))
}
