//! User, mount and network namespaces for confined commands: whether this machine has them
//! (probed once), and the mounts a command's child makes in them.
//!
//! In its own user and mount namespace a command sees every existing protected path (`.git`,
//! the configuration files that grant powers, …) as a read-only bind mount, and the usual
//! directories of pathname sockets that lead back into the user's session (tmux, X11, the
//! user's runtime dir, Docker, SSH agents) hidden under an empty read-only tmpfs or
//! `/dev/null`. With the network off it also gets a network namespace of its own, with only
//! a loopback interface that is down.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustix::fs::StatVfsMountFlags;

use super::child::{self, ChildPlan, MountOp, NamespacePlan};

/// The environment variable that, set to `1` in keel's environment, turns namespaces off (read once):
/// protected paths are then guarded by detect-and-restore alone.
pub const NO_NAMESPACES_VAR: &str = "KEEL_SANDBOX_NO_NAMESPACES";

/// What the machine allows, probed once per process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Support {
    /// A user namespace with a mount namespace: protected paths can be mounted read-only.
    pub(crate) mount: bool,
    /// Also a network namespace.
    pub(crate) net: bool,
}

/// The namespace support of this machine: probed once by starting `true` in new namespaces;
/// none when [`NO_NAMESPACES_VAR`] is `1`.
pub(crate) fn support() -> Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    *SUPPORT.get_or_init(|| {
        let none = Support {
            mount: false,
            net: false,
        };
        if std::env::var_os(NO_NAMESPACES_VAR).is_some_and(|v| v == "1") {
            tracing::debug!("namespaces turned off by {NO_NAMESPACES_VAR}");
            return none;
        }
        let base = libc::CLONE_NEWUSER | libc::CLONE_NEWNS;
        let support = if probe(base | libc::CLONE_NEWNET) {
            Support {
                mount: true,
                net: true,
            }
        } else if probe(base) {
            Support {
                mount: true,
                net: false,
            }
        } else {
            none
        };
        tracing::debug!(?support, "probed namespace support");
        support
    })
}

/// Whether `true` starts in new namespaces `flags`, with the uid/gid maps and `/` private.
fn probe(flags: libc::c_int) -> bool {
    let Some(plan) = plan(flags, Vec::new()) else {
        return false;
    };
    let child = ChildPlan {
        namespaces: Some(plan),
        ..ChildPlan::default()
    };
    let mut command = std::process::Command::new("true");
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    child::install(&mut command, Arc::new(child));
    // Registered, so a sweep running meanwhile leaves it alone.
    crate::reaper::spawn_std(&mut command, false)
        .and_then(|(mut child, _tracked)| child.wait())
        .is_ok_and(|status| status.success())
}

/// The namespace plan for `flags` and `mounts`; `None` if a path cannot be a C string.
pub(crate) fn plan(flags: libc::c_int, mounts: Vec<MountOp>) -> Option<NamespacePlan> {
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    Some(NamespacePlan {
        flags,
        setgroups_path: CString::new("/proc/self/setgroups").ok()?,
        uid_map_path: CString::new("/proc/self/uid_map").ok()?,
        gid_map_path: CString::new("/proc/self/gid_map").ok()?,
        uid_map: format!("{uid} {uid} 1\n").into_bytes(),
        gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        mounts,
    })
}

fn c_path(path: &Path) -> Option<CString> {
    CString::new(path.as_os_str().as_bytes()).ok()
}

/// The mounts that make `path` read-only: a recursive bind onto itself, then a read-only
/// remount that keeps the flags the kernel locks in a user namespace (nosuid, nodev, noexec
/// and the atime mode), read from the mount now, as bubblewrap does.
pub(crate) fn read_only_bind(path: &Path) -> Option<[MountOp; 2]> {
    let target = c_path(path)?;
    let locked = rustix::fs::statvfs(path)
        .ok()
        .map_or(0, |stat| locked_flags(stat.f_flag));
    Some([
        MountOp {
            source: Some(target.clone()),
            target: target.clone(),
            fstype: None,
            flags: libc::MS_BIND | libc::MS_REC,
            data: None,
            optional: true,
        },
        MountOp {
            source: None,
            target,
            fstype: None,
            flags: libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | locked,
            data: None,
            optional: true,
        },
    ])
}

/// The `MS_*` flags for the mount flags `statvfs` reports that a remount in a user namespace
/// must keep.
fn locked_flags(flags: StatVfsMountFlags) -> libc::c_ulong {
    let pairs = [
        (StatVfsMountFlags::NOSUID, libc::MS_NOSUID),
        (StatVfsMountFlags::NODEV, libc::MS_NODEV),
        (StatVfsMountFlags::NOEXEC, libc::MS_NOEXEC),
        (StatVfsMountFlags::NOATIME, libc::MS_NOATIME),
        (StatVfsMountFlags::NODIRATIME, libc::MS_NODIRATIME),
        (StatVfsMountFlags::RELATIME, libc::MS_RELATIME),
    ];
    let mut out = pairs
        .iter()
        .filter(|(stat, _)| flags.contains(*stat))
        .fold(0, |acc, (_, ms)| acc | ms);
    if !flags.intersects(StatVfsMountFlags::NOATIME | StatVfsMountFlags::RELATIME) {
        out |= libc::MS_STRICTATIME;
    }
    out
}

/// The pathname-socket places that lead back into the user's session, as they exist on this
/// machine: `/tmp/tmux-<uid>`, `/tmp/.X11-unix`, `/run/user/<uid>`, `$XDG_RUNTIME_DIR`,
/// `/run/docker.sock`, `/var/run/docker.sock`, `/tmp/ssh-*`; resolved, without those that
/// hold any of `keep` (the workspace, the temp dir).
pub(crate) fn session_sockets(keep: &[&Path]) -> Vec<PathBuf> {
    let uid = rustix::process::geteuid().as_raw();
    let mut places = vec![
        PathBuf::from(format!("/tmp/tmux-{uid}")),
        PathBuf::from("/tmp/.X11-unix"),
        PathBuf::from(format!("/run/user/{uid}")),
        PathBuf::from("/run/docker.sock"),
        PathBuf::from("/var/run/docker.sock"),
    ];
    places.extend(std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from));
    if let Ok(entries) = std::fs::read_dir("/tmp") {
        places.extend(
            entries
                .flatten()
                .filter(|e| e.file_name().as_bytes().starts_with(b"ssh-"))
                .map(|e| e.path()),
        );
    }
    let mut found: Vec<PathBuf> = Vec::new();
    for place in places {
        let Ok(real) = std::fs::canonicalize(&place) else {
            continue;
        };
        if real == Path::new("/") || keep.iter().any(|k| k.starts_with(&real)) {
            continue;
        }
        if !found.contains(&real) {
            found.push(real);
        }
    }
    found
}

/// The mount that hides `path`: an empty read-only tmpfs over a directory, `/dev/null` over
/// anything else.
pub(crate) fn hide(path: &Path) -> Option<MountOp> {
    let target = c_path(path)?;
    if path.is_dir() {
        Some(MountOp {
            source: CString::new("tmpfs").ok(),
            target,
            fstype: CString::new("tmpfs").ok(),
            flags: libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            data: CString::new("mode=0755,size=4k").ok(),
            optional: true,
        })
    } else {
        Some(MountOp {
            source: CString::new("/dev/null").ok(),
            target,
            fstype: None,
            flags: libc::MS_BIND,
            data: None,
            optional: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_atime_mode_is_always_kept() {
        assert_eq!(
            locked_flags(StatVfsMountFlags::NOSUID | StatVfsMountFlags::RELATIME),
            libc::MS_NOSUID | libc::MS_RELATIME
        );
        assert_eq!(
            locked_flags(StatVfsMountFlags::NODEV),
            libc::MS_NODEV | libc::MS_STRICTATIME
        );
    }

    #[test]
    fn places_holding_the_workspace_are_not_hidden() {
        let all = session_sockets(&[]);
        for place in &all {
            assert!(!session_sockets(&[place.join("work").as_path()]).contains(place));
        }
    }
}
