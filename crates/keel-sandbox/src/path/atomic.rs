//! Replacing a file beneath an open directory so that a reader sees the old contents or the
//! new ones whole, and a process killed midway leaves nothing behind.
//!
//! The new contents go into an unnamed file (`O_TMPFILE`) in the target's directory: until it
//! is linked it has no name, so a kill at any point of the write frees it with the process.
//! Whole, it is linked under the target's name when that does not exist yet (`linkat`, which
//! never replaces anything), or under a temp name renamed over the target at once: a named
//! temp exists only between those two syscalls. `linkat` goes through `/proc/self/fd/N`
//! (`AT_EMPTY_PATH` would need `CAP_DAC_READ_SEARCH`).
//!
//! Where the file system has no `O_TMPFILE` (or `/proc` is not mounted), the contents go into
//! a named temp file `.NAME.keel-PID-N.tmp`, renamed over the target; temps that keel
//! processes no longer alive left in that directory are removed first.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

/// Makes temp file names unique within the process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Replaces (or creates, when `created`) `name` in `dir` with `contents`, mode `mode`.
pub(super) fn replace(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    mode: Mode,
    created: bool,
    contents: &[u8],
) -> std::io::Result<()> {
    // A writer killed between naming its temp and renaming it leaves the temp: the next write
    // in the directory removes it (only dead keel processes' temps are touched).
    remove_stale_temps(dir);
    if write_unnamed(dir, name, mode, created, contents)? {
        return Ok(());
    }
    write_named(dir, name, mode, created, contents)
}

/// The `O_TMPFILE` way. `Ok(false)` when the file system (or a missing `/proc`) does not
/// allow it, before anything was named.
fn write_unnamed(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    mode: Mode,
    created: bool,
    contents: &[u8],
) -> std::io::Result<bool> {
    let fd = match rustix::fs::openat(
        dir,
        ".",
        OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC,
        mode,
    ) {
        Ok(fd) => fd,
        // No O_TMPFILE on this file system (EISDIR: a kernel that does not know the flag).
        Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL) => return Ok(false),
        Err(errno) => return Err(errno.into()),
    };
    let file = fill(fd, mode, created, contents)?;
    let proc_path = format!("/proc/self/fd/{}", file.as_raw_fd());
    let link = |to: &OsStr| {
        rustix::fs::linkat(
            rustix::fs::CWD,
            proc_path.as_str(),
            dir,
            to,
            AtFlags::SYMLINK_FOLLOW,
        )
    };
    if created {
        match link(name) {
            Ok(()) => return Ok(true),
            // Something appeared there meanwhile: replace it, as below.
            Err(Errno::EXIST) => {}
            Err(Errno::NOENT) => return Ok(false),
            Err(errno) => return Err(errno.into()),
        }
    }
    let temp = temp_name(name);
    match link(&temp) {
        Ok(()) => {}
        Err(Errno::NOENT) => return Ok(false), // no /proc
        Err(errno) => return Err(errno.into()),
    }
    rename_or_remove(dir, &temp, name)?;
    Ok(true)
}

/// The named-temp way: `.NAME.keel-PID-N.tmp` written, then renamed over `name`.
pub(super) fn write_named(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    mode: Mode,
    created: bool,
    contents: &[u8],
) -> std::io::Result<()> {
    let temp = temp_name(name);
    let fd = rustix::fs::openat(
        dir,
        &temp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        mode,
    )?;
    if let Err(err) = fill(fd, mode, created, contents) {
        // Best effort: the temp file is ours and useless now.
        let _ = rustix::fs::unlinkat(dir, &temp, AtFlags::empty());
        return Err(err);
    }
    rename_or_remove(dir, &temp, name)
}

/// Writes `contents` into a new file and flushes them to disk; an existing target's mode is
/// set exactly (the umask may have narrowed it at open).
fn fill(fd: OwnedFd, mode: Mode, created: bool, contents: &[u8]) -> std::io::Result<File> {
    if !created {
        rustix::fs::fchmod(&fd, mode)?;
    }
    let mut file = File::from(fd);
    file.write_all(contents)?;
    file.sync_all()?;
    Ok(file)
}

fn rename_or_remove(dir: BorrowedFd<'_>, temp: &OsStr, name: &OsStr) -> std::io::Result<()> {
    if let Err(errno) = rustix::fs::renameat(dir, temp, dir, name) {
        let _ = rustix::fs::unlinkat(dir, temp, AtFlags::empty());
        return Err(errno.into());
    }
    Ok(())
}

/// `.NAME.keel-PID-N.tmp`, short enough for NAME_MAX.
fn temp_name(name: &OsStr) -> OsString {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut temp = OsString::from(".");
    let stem: String = name.to_string_lossy().chars().take(200).collect();
    temp.push(stem);
    temp.push(format!(".keel-{}-{n}.tmp", std::process::id()));
    temp
}

/// The process id in a temp name of ours, `.NAME.keel-PID-N.tmp`.
fn temp_pid(name: &[u8]) -> Option<u32> {
    let name = std::str::from_utf8(name).ok()?;
    let rest = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let (stem, ids) = rest.rsplit_once(".keel-")?;
    let (pid, n) = ids.split_once('-')?;
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    if stem.is_empty() || !digits(pid) || !digits(n) {
        return None;
    }
    pid.parse().ok()
}

/// Whether process `pid` exists (one we may not signal exists too).
fn alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    !matches!(rustix::process::test_kill_process(pid), Err(Errno::SRCH))
}

/// Removes the temp files in `dir` that keel processes no longer alive left (killed between
/// creating and renaming them). Best effort: what cannot be read or removed stays.
pub(super) fn remove_stale_temps(dir: BorrowedFd<'_>) -> usize {
    let own = std::process::id();
    let listing = rustix::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .and_then(rustix::fs::Dir::new);
    let mut listing = match listing {
        Ok(listing) => listing,
        Err(errno) => {
            tracing::debug!(%errno, "cannot list a directory for stale temp files");
            return 0;
        }
    };
    let mut removed = 0;
    while let Some(Ok(entry)) = listing.read() {
        let name = entry.file_name().to_bytes();
        let Some(pid) = temp_pid(name) else {
            continue;
        };
        if pid == own || alive(pid) {
            continue;
        }
        let name = OsStr::from_bytes(name);
        let regular =
            rustix::fs::statat(dir.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|stat| {
                rustix::fs::FileType::from_raw_mode(stat.st_mode)
                    == rustix::fs::FileType::RegularFile
            });
        if regular && rustix::fs::unlinkat(dir, name, AtFlags::empty()).is_ok() {
            tracing::debug!(name = %name.to_string_lossy(), pid, "removed a stale temp file");
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_recognised() {
        let name = temp_name(OsStr::new("data.txt"));
        assert_eq!(temp_pid(name.as_bytes()), Some(std::process::id()));
        assert_eq!(temp_pid(b".a.b.keel-12-3.tmp"), Some(12));
        for other in [
            &b"data.txt"[..],
            b".data.txt.keel-x-0.tmp",
            b".keel-12-3.tmp",
            b".a.keel-12.tmp",
            b"a.keel-12-3.tmp",
            b".a.keel-12-3.tmp.bak",
        ] {
            assert_eq!(temp_pid(other), None, "{}", String::from_utf8_lossy(other));
        }
    }

    /// A pid that was alive a moment ago and is not now.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn stale_temps_of_dead_processes_are_removed_and_others_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path();
        let dead = dead_pid();
        let keep = [
            format!(".data.txt.keel-{}-0.tmp", std::process::id()), // ours, maybe in flight
            ".data.txt.keel-1-0.tmp".to_owned(),                    // init is alive
            "data.txt".to_owned(),
            format!("data.keel-{dead}-0.tmp"), // not a temp name
        ];
        let stale = [
            format!(".data.txt.keel-{dead}-0.tmp"),
            format!(".other.bin.keel-{dead}-17.tmp"),
        ];
        for name in keep.iter().chain(&stale) {
            std::fs::write(path.join(name), "x").unwrap();
        }
        // A directory with a temp's name is not ours to remove.
        std::fs::create_dir(path.join(format!(".d.keel-{dead}-1.tmp"))).unwrap();
        let fd = rustix::fs::open(path, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();

        assert_eq!(remove_stale_temps(fd.as_fd()), stale.len());
        let mut left: Vec<String> = std::fs::read_dir(path)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mut expected: Vec<String> = keep.to_vec();
        expected.push(format!(".d.keel-{dead}-1.tmp"));
        expected.sort();
        assert_eq!(left, expected);
    }

    #[test]
    fn the_named_way_cleans_up_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path();
        let dead = dead_pid();
        std::fs::write(path.join("data.txt"), "old").unwrap();
        std::fs::write(path.join(format!(".data.txt.keel-{dead}-0.tmp")), "stale").unwrap();
        let fd = rustix::fs::open(path, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();

        remove_stale_temps(fd.as_fd());
        write_named(
            fd.as_fd(),
            OsStr::new("data.txt"),
            Mode::from_raw_mode(0o600),
            false,
            b"new",
        )
        .unwrap();
        let left: Vec<_> = std::fs::read_dir(path).unwrap().collect();
        assert_eq!(left.len(), 1);
        assert_eq!(
            std::fs::read_to_string(path.join("data.txt")).unwrap(),
            "new"
        );
    }

    #[test]
    fn the_unnamed_way_leaves_no_name_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path();
        let fd = rustix::fs::open(path, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        let mode = Mode::from_raw_mode(0o644);
        // A file system without O_TMPFILE takes the named way; nothing to check here then.
        if !write_unnamed(fd.as_fd(), OsStr::new("new.txt"), mode, true, b"one").unwrap() {
            return;
        }
        assert!(write_unnamed(fd.as_fd(), OsStr::new("new.txt"), mode, false, b"two").unwrap());
        let left: Vec<_> = std::fs::read_dir(path).unwrap().collect();
        assert_eq!(left.len(), 1);
        assert_eq!(
            std::fs::read_to_string(path.join("new.txt")).unwrap(),
            "two"
        );
    }
}
