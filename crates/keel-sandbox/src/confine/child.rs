//! What a confined command's child process does between `fork` and `exec`.
//!
//! Everything is prepared in the parent ([`ChildPlan`]): paths as C strings, the uid/gid map
//! lines, the mount list, the seccomp program, the Landlock ruleset descriptor. The child
//! only makes raw, async-signal-safe system calls on that memory, in this order: `setsid`;
//! with namespaces, `setns` into the shared ones or `unshare` new ones (then the uid/gid
//! maps, `setgroups` denied first), a new mount namespace with `/` made recursively private
//! and the mounts; then every capability dropped from the bounding and ambient sets (so a
//! command keel runs as root has none after `exec`: it cannot read keel's memory or
//! environment through `/proc`, make devices or override file permissions), then
//! `prctl(PR_SET_NO_NEW_PRIVS)`, the seccomp filter and `landlock_restrict_self`. Landlock forbids mount changes from then on, which is
//! what keeps the command from undoing the mounts.
//!
//! Built without the `confine` feature, the plan is empty and the child only calls `setsid`.

#![allow(unsafe_code)]

#[cfg(feature = "confine")]
use std::ffi::CString;
use std::io;
#[cfg(feature = "confine")]
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

/// One `mount(2)` call.
#[cfg(feature = "confine")]
#[derive(Debug)]
pub(crate) struct MountOp {
    pub(crate) source: Option<CString>,
    pub(crate) target: CString,
    pub(crate) fstype: Option<CString>,
    pub(crate) flags: libc::c_ulong,
    pub(crate) data: Option<CString>,
    /// Whether a missing target (`ENOENT`) is fine: it went away since it was planned.
    pub(crate) optional: bool,
}

/// The namespaces a child enters and what it mounts in them.
#[cfg(feature = "confine")]
#[derive(Debug)]
pub(crate) struct NamespacePlan {
    /// Namespaces joined first (`setns`): descriptors the parent keeps open, and their types.
    pub(crate) join: Vec<(libc::c_int, libc::c_int)>,
    /// Then made anew (`unshare`): some of `CLONE_NEWUSER`, `CLONE_NEWNS`, `CLONE_NEWNET`.
    pub(crate) flags: libc::c_int,
    pub(crate) setgroups_path: CString,
    pub(crate) uid_map_path: CString,
    pub(crate) gid_map_path: CString,
    /// `"<uid> <uid> 1\n"`: the user maps to itself (written with a new user namespace).
    pub(crate) uid_map: Vec<u8>,
    pub(crate) gid_map: Vec<u8>,
    /// With a new mount namespace: after `/` is made private, in order.
    pub(crate) mounts: Vec<MountOp>,
}

/// Everything the child does before `exec`, prepared in the parent.
#[derive(Debug, Default)]
pub(crate) struct ChildPlan {
    #[cfg(feature = "confine")]
    pub(crate) namespaces: Option<NamespacePlan>,
    /// The highest capability number of this kernel: every capability up to it is dropped
    /// from the bounding set. `None`: none is dropped.
    #[cfg(feature = "confine")]
    pub(crate) last_capability: Option<libc::c_int>,
    #[cfg(feature = "confine")]
    pub(crate) no_new_privs: bool,
    /// A seccomp program; its length fits `u16` (checked when it was built).
    #[cfg(feature = "confine")]
    pub(crate) seccomp: Option<Vec<libc::sock_filter>>,
    #[cfg(feature = "confine")]
    pub(crate) landlock: Option<OwnedFd>,
}

/// Makes `command`'s child run `plan` before it executes the program. The closure holds
/// `plan` (and so the Landlock descriptor) until the command is dropped.
pub(crate) fn install(command: &mut std::process::Command, plan: Arc<ChildPlan>) {
    use std::os::unix::process::CommandExt;
    let hook = move || run(&plan);
    // SAFETY: the hook runs in the child between fork and exec, where only
    // async-signal-safe work is allowed. `run` only reads memory prepared before the fork
    // (the plan, shared through an `Arc` the parent keeps alive; no reference count changes
    // in the child), builds small values on the stack, and makes raw system calls (setsid,
    // setns, unshare, open, write, close, mount, prctl, seccomp, landlock_restrict_self), all
    // async-signal-safe. On failure it reads errno (`io::Error::last_os_error` builds an
    // integer-only error without allocating). It allocates nothing and takes no locks.
    unsafe {
        command.pre_exec(hook);
    }
}

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

/// The child's side, in order.
fn run(plan: &ChildPlan) -> io::Result<()> {
    // SAFETY: setsid takes no arguments and touches no memory of ours.
    if unsafe { libc::setsid() } == -1 {
        let err = last_error();
        // EPERM: the command was already made a process group leader (`process_group(0)`),
        // which keeps it in its own group: good enough.
        if err.raw_os_error() != Some(libc::EPERM) {
            return Err(err);
        }
    }
    #[cfg(feature = "confine")]
    confine(plan)?;
    #[cfg(not(feature = "confine"))]
    let _ = plan;
    Ok(())
}

/// The confinement steps, after `setsid`.
#[cfg(feature = "confine")]
fn confine(plan: &ChildPlan) -> io::Result<()> {
    if let Some(namespaces) = &plan.namespaces {
        enter_namespaces(namespaces)?;
    }
    if let Some(last) = plan.last_capability {
        drop_capabilities(last);
    }
    if plan.no_new_privs {
        let zero = libc::c_ulong::from(0u8);
        // SAFETY: prctl with PR_SET_NO_NEW_PRIVS takes integer arguments only.
        let set = unsafe {
            libc::prctl(
                libc::PR_SET_NO_NEW_PRIVS,
                libc::c_ulong::from(1u8),
                zero,
                zero,
                zero,
            )
        };
        if set != 0 {
            return Err(last_error());
        }
    }
    if let Some(filter) = &plan.seccomp {
        let program = libc::sock_fprog {
            len: u16::try_from(filter.len()).unwrap_or(u16::MAX),
            filter: filter.as_ptr().cast_mut(),
        };
        // SAFETY: seccomp(SECCOMP_SET_MODE_FILTER) reads `program` (on our stack) and the
        // filter it points to (allocated by the parent before the fork, alive in the plan);
        // no_new_privs is set above, so an unprivileged process may install it.
        let installed = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::c_ulong::from(libc::SECCOMP_SET_MODE_FILTER),
                libc::c_ulong::from(0u8),
                &raw const program,
            )
        };
        if installed != 0 {
            return Err(last_error());
        }
    }
    if let Some(ruleset) = &plan.landlock {
        // SAFETY: landlock_restrict_self takes a descriptor number and flags; the ruleset
        // descriptor is inherited from the parent, which keeps it open in the plan.
        let restricted = unsafe {
            libc::syscall(
                libc::SYS_landlock_restrict_self,
                libc::c_long::from(ruleset.as_raw_fd()),
                libc::c_long::from(0u8),
            )
        };
        if restricted != 0 {
            return Err(last_error());
        }
    }
    Ok(())
}

/// The highest capability number the kernel knows (`/proc/sys/kernel/cap_last_cap`), read in
/// the parent; the newest this crate knows when the file cannot be read.
#[cfg(feature = "confine")]
pub(crate) fn last_capability() -> Option<libc::c_int> {
    const KNOWN_LAST: libc::c_int = 40; // CAP_CHECKPOINT_RESTORE
    let read = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|text| text.trim().parse::<libc::c_int>().ok());
    Some(read.unwrap_or(KNOWN_LAST).clamp(0, 63))
}

/// Drops every capability up to `last` from the bounding set and clears the ambient set, so
/// that after `exec` the command holds none, even as root (`no_new_privs` keeps setuid and
/// file capabilities from giving them back). Failures are ignored: a process without
/// `CAP_SETPCAP` (any non-root user outside a user namespace) has no capabilities to drop.
#[cfg(feature = "confine")]
fn drop_capabilities(last: libc::c_int) {
    let zero = libc::c_ulong::from(0u8);
    for cap in 0..=last {
        let Ok(cap) = libc::c_ulong::try_from(cap) else {
            continue;
        };
        // SAFETY: prctl with PR_CAPBSET_DROP takes integer arguments only.
        unsafe {
            libc::prctl(libc::PR_CAPBSET_DROP, cap, zero, zero, zero);
        }
    }
    // SAFETY: prctl with PR_CAP_AMBIENT takes integer arguments only.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::c_ulong::try_from(libc::PR_CAP_AMBIENT_CLEAR_ALL).unwrap_or(4),
            zero,
            zero,
            zero,
        );
    }
}

#[cfg(feature = "confine")]
fn enter_namespaces(plan: &NamespacePlan) -> io::Result<()> {
    for &(fd, kind) in &plan.join {
        // SAFETY: setns takes a descriptor number (kept open by the parent) and a type. The
        // child is single-threaded, as joining a user namespace requires.
        if unsafe { libc::setns(fd, kind) } != 0 {
            return Err(last_error());
        }
    }
    if plan.flags != 0 {
        // SAFETY: unshare takes flags only. The child is single-threaded, as a new user
        // namespace requires.
        if unsafe { libc::unshare(plan.flags) } != 0 {
            return Err(last_error());
        }
    }
    if plan.flags & libc::CLONE_NEWUSER != 0 {
        write_file(&plan.setgroups_path, b"deny")?;
        write_file(&plan.uid_map_path, &plan.uid_map)?;
        write_file(&plan.gid_map_path, &plan.gid_map)?;
    }
    if plan.flags & libc::CLONE_NEWNS == 0 {
        return Ok(());
    }
    let root = c"/";
    // SAFETY: mount reads the NUL-terminated strings given (a literal here) and nothing else.
    let private = unsafe {
        libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    if private != 0 {
        return Err(last_error());
    }
    for op in &plan.mounts {
        let as_ptr = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
        // SAFETY: mount reads the NUL-terminated strings of `op`, prepared in the parent and
        // alive in the plan; a null pointer stands for "none" where mount allows it.
        let mounted = unsafe {
            libc::mount(
                as_ptr(&op.source),
                op.target.as_ptr(),
                as_ptr(&op.fstype),
                op.flags,
                as_ptr(&op.data).cast(),
            )
        };
        if mounted != 0 {
            let err = last_error();
            if !(op.optional && err.raw_os_error() == Some(libc::ENOENT)) {
                return Err(err);
            }
        }
    }
    Ok(())
}

/// Writes `bytes` to the existing file `path` in one `write`.
#[cfg(feature = "confine")]
fn write_file(path: &CString, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: open reads the NUL-terminated path prepared in the parent.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(last_error());
    }
    // SAFETY: write reads `bytes.len()` bytes of `bytes`, which the parent prepared; `fd` was
    // just opened.
    let written = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    let result = if usize::try_from(written).ok() == Some(bytes.len()) {
        Ok(())
    } else {
        Err(last_error())
    };
    // SAFETY: closes the descriptor opened above, once.
    unsafe {
        libc::close(fd);
    }
    result
}
