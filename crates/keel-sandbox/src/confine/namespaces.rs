//! User, mount and network namespaces for confined commands: whether this machine has them
//! (probed once), and the mounts a command's child makes in them.
//!
//! In its own user and mount namespace a command sees every existing protected path (`.git`,
//! the configuration files that grant powers, …) as a read-only bind mount, and the usual
//! directories of pathname sockets that lead back into the user's session (tmux, X11, the
//! user's runtime dir, Docker, SSH agents) hidden under an empty read-only tmpfs or
//! `/dev/null`. With the network off it also gets a network namespace of its own, with only
//! a loopback interface that is down. Joining namespaces is much cheaper than making them, so
//! where it works every command joins one user namespace and one network namespace made once
//! for the process, and makes only its mount namespace; elsewhere each command makes all of
//! its own.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustix::fs::{Mode, OFlags, StatVfsMountFlags};

use super::NO_NAMESPACES_VAR;
use super::child::{self, ChildPlan, MountOp, NamespacePlan};

/// How commands get their namespaces on this machine, probed once per process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Support {
    /// None work (or [`NO_NAMESPACES_VAR`] is `1`): detect-and-restore only.
    None,
    /// Join the process's shared user and network namespaces (`setns`, cheap), then make a
    /// mount namespace.
    Shared {
        /// The shared user namespace (the user mapped to itself).
        user: RawFd,
        /// The shared network namespace in it: only a loopback interface, down.
        net: RawFd,
    },
    /// Make new user and mount namespaces for every command, and a network namespace if
    /// `net`.
    Fresh {
        /// Whether new network namespaces work.
        net: bool,
    },
}

/// The namespace support of this machine: probed once, by starting `true` in namespaces;
/// none when [`NO_NAMESPACES_VAR`] is `1`.
pub(crate) fn support() -> Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    *SUPPORT.get_or_init(|| {
        if std::env::var_os(NO_NAMESPACES_VAR).is_some_and(|v| v == "1") {
            tracing::debug!("namespaces turned off by {NO_NAMESPACES_VAR}");
            return Support::None;
        }
        let support = probe_support();
        tracing::debug!(?support, "probed namespace support");
        support
    })
}

fn probe_support() -> Support {
    if let Some((user, net)) = shared() {
        let joined = Support::Shared { user, net };
        if plan(joined, true, Vec::new()).is_some_and(probe) {
            return joined;
        }
    }
    let fresh = Support::Fresh { net: true };
    if plan(fresh, true, Vec::new()).is_some_and(probe) {
        return fresh;
    }
    let fresh = Support::Fresh { net: false };
    if plan(fresh, false, Vec::new()).is_some_and(probe) {
        return fresh;
    }
    Support::None
}

/// The shared user and network namespaces, made once and kept open for the process's life:
/// a helper (`cat`, waiting on its stdin) is started in new ones, their descriptors taken
/// from `/proc`, and the helper let go.
fn shared() -> Option<(RawFd, RawFd)> {
    static SHARED: OnceLock<Option<(OwnedFd, OwnedFd)>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            let plan = plan(Support::Fresh { net: true }, true, Vec::new()).map(|mut plan| {
                // No mount namespace for the helper: it only holds the others.
                plan.flags &= !libc::CLONE_NEWNS;
                plan
            })?;
            let mut command = std::process::Command::new("cat");
            command
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            child::install(
                &mut command,
                Arc::new(ChildPlan {
                    namespaces: Some(plan),
                    ..ChildPlan::default()
                }),
            );
            let (mut helper, _tracked) = crate::reaper::spawn_std(&mut command, false).ok()?;
            let open = |kind: &str| {
                rustix::fs::open(
                    format!("/proc/{}/ns/{kind}", helper.id()),
                    OFlags::RDONLY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .ok()
            };
            let held = open("user").zip(open("net"));
            drop(helper.stdin.take());
            let _ = helper.wait();
            held
        })
        .as_ref()
        .map(|(user, net)| (user.as_raw_fd(), net.as_raw_fd()))
}

/// Whether `true` starts in the namespaces of `plan`.
fn probe(plan: NamespacePlan) -> bool {
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

/// The namespaces for a command under `support` (with a network namespace when
/// `network_off`), making `mounts` in its new mount namespace; `None` without namespaces.
pub(crate) fn plan(
    support: Support,
    network_off: bool,
    mounts: Vec<MountOp>,
) -> Option<NamespacePlan> {
    let (join, flags) = match support {
        Support::None => return None,
        Support::Shared { user, net } => {
            let mut join = vec![(user, libc::CLONE_NEWUSER)];
            if network_off {
                join.push((net, libc::CLONE_NEWNET));
            }
            (join, libc::CLONE_NEWNS)
        }
        Support::Fresh { net } => {
            let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS;
            if network_off && net {
                flags |= libc::CLONE_NEWNET;
            }
            (Vec::new(), flags)
        }
    };
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    Some(NamespacePlan {
        join,
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
/// machine: `/tmp/tmux-<uid>` and `$TMUX_TMPDIR/tmux-<uid>`, `/tmp/.X11-unix`,
/// `/run/user/<uid>`, `$XDG_RUNTIME_DIR`, `/run/docker.sock`, `/var/run/docker.sock`,
/// `/tmp/ssh-*` and `$SSH_AUTH_SOCK` itself; resolved, without those that hold any
/// of `keep` (the workspace, the temp dir).
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
    places.extend(
        std::env::var_os("TMUX_TMPDIR").map(|dir| PathBuf::from(dir).join(format!("tmux-{uid}"))),
    );
    places.extend(std::env::var_os("SSH_AUTH_SOCK").map(PathBuf::from));
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

    /// Runs `script` with `sh -c` in the namespaces of `plan`; its stdout and success.
    fn run_in(plan: NamespacePlan, script: &str) -> (String, bool) {
        let mut command = std::process::Command::new("sh");
        command.arg("-c").arg(script);
        child::install(
            &mut command,
            Arc::new(ChildPlan {
                namespaces: Some(plan),
                ..ChildPlan::default()
            }),
        );
        let output = command.output().unwrap();
        (
            String::from_utf8_lossy(&output.stdout).into_owned(),
            output.status.success(),
        )
    }

    #[test]
    fn both_ways_into_namespaces_protect_files_and_take_the_network() {
        if support() == Support::None {
            println!("skipped: no user namespaces here");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("protected");
        std::fs::write(&file, "kept\n").unwrap();
        let mut ways = vec![Support::Fresh { net: true }];
        if let Some((user, net)) = shared() {
            ways.push(Support::Shared { user, net });
        }
        for way in ways {
            let mounts = read_only_bind(&file).unwrap().into_iter().collect();
            let script = format!(
                "echo changed > '{}' || echo refused; grep -c : /proc/net/dev",
                file.display()
            );
            let (out, ok) = run_in(plan(way, true, mounts).unwrap(), &script);
            assert!(ok, "{way:?}: {out}");
            // Refused, and only the loopback interface.
            assert_eq!(out, "refused\n1\n", "{way:?}");
            assert_eq!(std::fs::read_to_string(&file).unwrap(), "kept\n");
            // With the network on, the host's network namespace.
            let (out, _) = run_in(plan(way, false, Vec::new()).unwrap(), "cat /proc/net/dev");
            let host = std::fs::read_to_string("/proc/net/dev").unwrap();
            assert_eq!(out.lines().count(), host.lines().count(), "{way:?}");
        }
    }

    #[test]
    fn places_holding_the_workspace_are_not_hidden() {
        let all = session_sockets(&[]);
        for place in &all {
            assert!(!session_sockets(&[place.join("work").as_path()]).contains(place));
        }
    }
}
