//! Rewinding: the workspace's snapshots (keel takes one before every call that may change
//! files), and putting the workspace back to one of them — `keel rewind`, the REPL's and an
//! editor's `/rewind`. A live session never rewinds over another live session's edits in the
//! same workspace: [`SessionHost::rewind`] refuses, naming the other session and its files.

use std::path::Path;

use keel::snapshot::{RestoreReport, ShadowSnapshots, SnapshotInfo, Snapshots};
use keel_config::files::SnapshotsConfig;

use crate::{HostError, SessionHost};

/// The snapshot store of `workspace` with the limits of `config`.
pub fn open(
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
pub fn list_lines(infos: &[SnapshotInfo]) -> Vec<String> {
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
pub fn find<'a>(infos: &'a [SnapshotInfo], arg: &str) -> Result<&'a SnapshotInfo, String> {
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
pub fn report_lines(info: &SnapshotInfo, report: &RestoreReport) -> Vec<String> {
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
#[derive(Debug)]
pub enum Rewound {
    /// No snapshot was named: the workspace's snapshots, oldest first (empty: none yet).
    Listed(Vec<SnapshotInfo>),
    /// The files are back as they were at this snapshot: it, and what the restore did.
    Restored(Box<(SnapshotInfo, RestoreReport)>),
}

/// The snapshots of `snapshots`, or with `argument` (a number from the list, or an id) the
/// files put back as they were at that snapshot: `keel rewind`, `/rewind` and ACP's
/// `/rewind`. `guard` sees the snapshots and the one chosen before anything is restored, and
/// may refuse. A snapshot that is not there, or a refusal, is an invalid request; a store
/// that fails, a failure.
pub fn list_or_restore(
    snapshots: &impl Snapshots,
    argument: Option<&str>,
    guard: impl Fn(&[SnapshotInfo], usize) -> Result<(), String>,
) -> Result<Rewound, HostError> {
    let infos = snapshots
        .list()
        .map_err(|err| HostError::Failed(format!("cannot list snapshots: {err}")))?;
    let Some(argument) = argument else {
        return Ok(Rewound::Listed(infos));
    };
    let info = find(&infos, argument).map_err(HostError::Invalid)?.clone();
    let chosen = infos
        .iter()
        .position(|candidate| candidate.id == info.id)
        .unwrap_or_default();
    guard(&infos, chosen).map_err(HostError::Invalid)?;
    let report = snapshots
        .restore(&info.id.0)
        .map_err(|err| HostError::Failed(format!("cannot rewind: {err}")))?;
    Ok(Rewound::Restored(Box::new((info, report))))
}

/// The reason to refuse restoring snapshot `chosen` of `infos` for session `session`: a later
/// snapshot was taken by one of the `live` sessions (other live sessions in the same
/// workspace), so restoring would undo its edits; `None` when nothing stands in the way.
pub fn undoes_other_sessions(
    infos: &[SnapshotInfo],
    chosen: usize,
    session: &str,
    live: &[String],
) -> Option<String> {
    let mut others: Vec<(&str, Vec<&str>)> = Vec::new();
    for info in infos.iter().skip(chosen + 1) {
        let by = info.point.session_id.as_str();
        if by == session || !live.iter().any(|id| id == by) {
            continue;
        }
        // The snapshot before a call of theirs: that call and what followed changed these.
        let files: Vec<&str> = info.changed.iter().map(String::as_str).collect();
        match others.iter_mut().find(|(id, _)| *id == by) {
            Some((_, seen)) => seen.extend(files),
            None => others.push((by, files)),
        }
    }
    if others.is_empty() {
        return None;
    }
    let named: Vec<String> = others
        .into_iter()
        .map(|(id, mut files)| {
            files.sort_unstable();
            files.dedup();
            let short: String = id.chars().take(8).collect();
            let shown: Vec<&str> = files.iter().copied().take(5).collect();
            let more = files.len().saturating_sub(shown.len());
            let mut text = format!("session {short} (live) changed {}", shown.join(", "));
            if more > 0 {
                text.push_str(&format!(" and {more} more"));
            }
            text
        })
        .collect();
    Some(format!(
        "not rewound: {} after that snapshot, and rewinding would undo it; end that session \
         first, or rewind from it",
        named.join("; ")
    ))
}

impl SessionHost {
    /// Session `id`'s workspace snapshots, or with `argument` (a number from the list, or an
    /// id) the files put back as they were at that snapshot — refused when a later snapshot
    /// was taken by another live session of this host in the same workspace (restoring would
    /// undo its edits). Off the async threads.
    pub async fn rewind(&self, id: &str, argument: Option<String>) -> Result<Rewound, HostError> {
        let live = self.get(id)?;
        let Some(snapshots) = live.coding().snapshots().cloned() else {
            return Err(HostError::Invalid(SNAPSHOTS_OFF.to_owned()));
        };
        let others: Vec<String> = self
            .neighbours(id, live.cwd())
            .iter()
            .map(|other| other.id().to_owned())
            .collect();
        let session = id.to_owned();
        tokio::task::spawn_blocking(move || {
            list_or_restore(snapshots.as_ref(), argument.as_deref(), |infos, chosen| {
                match undoes_other_sessions(infos, chosen, &session, &others) {
                    Some(reason) => Err(reason),
                    None => Ok(()),
                }
            })
        })
        .await
        .map_err(|err| HostError::Failed(format!("cannot rewind: {err}")))?
    }
}

/// What a session's `/rewind` says when the workspace has no snapshot yet.
pub const NO_SNAPSHOTS: &str =
    "no snapshots of this workspace yet; keel takes one before every call that may change files";

/// What a session's `/rewind` says when snapshots are off.
pub const SNAPSHOTS_OFF: &str =
    "snapshots are off ([snapshots] enabled = false, or the store failed)";
