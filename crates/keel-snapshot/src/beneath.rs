//! Changing files beneath the workspace root without ever following a symlink: every
//! directory is opened one component at a time with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)`, so a directory the model replaced by a symlink (`src -> /etc`) is
//! never written or deleted through; where a directory is needed, such a symlink (or a file) is
//! removed and a real directory made.

use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// The workspace root, held open.
#[derive(Debug)]
pub(crate) struct Root {
    fd: OwnedFd,
}

const DIR_FLAGS: OFlags = OFlags::DIRECTORY
    .union(OFlags::RDONLY)
    .union(OFlags::CLOEXEC)
    .union(OFlags::NOFOLLOW);

fn resolve() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

/// Splits a `/`-separated relative path into its parent's components and its name, refusing
/// empty, `.`, `..` and `.git` components.
pub(crate) fn split(path: &[u8]) -> io::Result<(Vec<&[u8]>, &[u8])> {
    let mut parts: Vec<&[u8]> = path.split(|b| *b == b'/').collect();
    for part in &parts {
        if part.is_empty() || *part == b"." || *part == b".." || part.eq_ignore_ascii_case(b".git")
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("refusing path {:?}", String::from_utf8_lossy(path)),
            ));
        }
    }
    let name = parts.pop().unwrap_or_default();
    Ok((parts, name))
}

fn os(part: &[u8]) -> &std::ffi::OsStr {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::OsStr::from_bytes(part)
}

impl Root {
    /// Opens the workspace root (itself not a symlink).
    pub(crate) fn open(path: &Path) -> io::Result<Self> {
        let fd = rustix::fs::open(path, DIR_FLAGS, Mode::empty())?;
        Ok(Self { fd })
    }

    fn dup(&self) -> io::Result<OwnedFd> {
        Ok(rustix::fs::openat(&self.fd, ".", DIR_FLAGS, Mode::empty())?)
    }

    /// Opens the directory `parts`, making what is missing and replacing anything that is not a
    /// real directory (a symlink, a file) by one.
    pub(crate) fn dir_for_write(&self, parts: &[&[u8]]) -> io::Result<OwnedFd> {
        let mut dir = self.dup()?;
        for part in parts {
            let name = os(part);
            dir = match rustix::fs::openat2(&dir, name, DIR_FLAGS, Mode::empty(), resolve()) {
                Ok(fd) => fd,
                Err(Errno::NOENT) => {
                    make_dir(&dir, name)?;
                    rustix::fs::openat2(&dir, name, DIR_FLAGS, Mode::empty(), resolve())?
                }
                Err(Errno::LOOP | Errno::NOTDIR | Errno::XDEV) => {
                    // A symlink or a file where a directory belongs: remove that entry (never
                    // what it points to) and make the directory.
                    tracing::info!(name = ?name, "replacing a non-directory by a directory");
                    rustix::fs::unlinkat(&dir, name, AtFlags::empty())?;
                    make_dir(&dir, name)?;
                    rustix::fs::openat2(&dir, name, DIR_FLAGS, Mode::empty(), resolve())?
                }
                Err(err) => return Err(err.into()),
            };
        }
        Ok(dir)
    }

    /// Opens the existing real directory `parts`; `None` when a component is missing or is not
    /// a real directory (then nothing beneath it is the workspace's).
    pub(crate) fn dir_existing(&self, parts: &[&[u8]]) -> io::Result<Option<OwnedFd>> {
        let mut dir = self.dup()?;
        for part in parts {
            dir = match rustix::fs::openat2(&dir, os(part), DIR_FLAGS, Mode::empty(), resolve()) {
                Ok(fd) => fd,
                Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR | Errno::XDEV) => return Ok(None),
                Err(err) => return Err(err.into()),
            };
        }
        Ok(Some(dir))
    }
}

fn make_dir(dir: &OwnedFd, name: &std::ffi::OsStr) -> io::Result<()> {
    match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o755)) {
        Ok(()) | Err(Errno::EXIST) => Ok(()),
        Err(err) => Err(err.into()),
    }
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn temp_name() -> String {
    format!(
        ".keel-restore-{}-{}",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// What to put at a path.
pub(crate) enum Content<'a> {
    /// A regular file with these bytes and permission bits.
    File(&'a [u8], u32),
    /// A symlink to this target.
    Link(&'a [u8]),
}

/// Puts `content` at `name` in `dir`: written to a temporary name first, then renamed over
/// whatever is there (a file, a symlink — never written through — or an empty directory).
pub(crate) fn put(dir: &OwnedFd, name: &[u8], content: &Content<'_>) -> io::Result<()> {
    let temp = temp_name();
    match content {
        Content::File(bytes, mode) => {
            let fd = rustix::fs::openat(
                dir,
                temp.as_str(),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            )?;
            let mut file = std::fs::File::from(fd);
            let written = file
                .write_all(bytes)
                .and_then(|()| Ok(rustix::fs::fchmod(&file, Mode::from_raw_mode(*mode))?));
            if let Err(err) = written {
                let _ = rustix::fs::unlinkat(dir, temp.as_str(), AtFlags::empty());
                return Err(err);
            }
        }
        Content::Link(target) => rustix::fs::symlinkat(os(target), dir, temp.as_str())?,
    }
    let renamed = match rustix::fs::renameat(dir, temp.as_str(), dir, os(name)) {
        Err(Errno::ISDIR | Errno::NOTEMPTY | Errno::EXIST) => {
            // An empty directory is in the way: remove it and try again.
            rustix::fs::unlinkat(dir, os(name), AtFlags::REMOVEDIR)
                .and_then(|()| rustix::fs::renameat(dir, temp.as_str(), dir, os(name)))
        }
        other => other,
    };
    if let Err(err) = renamed {
        let _ = rustix::fs::unlinkat(dir, temp.as_str(), AtFlags::empty());
        return Err(err.into());
    }
    Ok(())
}

/// Removes the file or symlink `name` in `dir` (never a directory); a missing one is fine.
pub(crate) fn remove(dir: &OwnedFd, name: &[u8]) -> io::Result<bool> {
    match rustix::fs::unlinkat(dir, os(name), AtFlags::empty()) {
        Ok(()) => Ok(true),
        Err(Errno::NOENT) => Ok(false),
        Err(err) => Err(err.into()),
    }
}

/// Removes the directory `name` in `dir` if it is empty.
pub(crate) fn remove_empty_dir(dir: &OwnedFd, name: &[u8]) -> bool {
    rustix::fs::unlinkat(dir, os(name), AtFlags::REMOVEDIR).is_ok()
}

/// Sets the permission bits of the directory `dir`.
pub(crate) fn chmod_dir(dir: &OwnedFd, mode: u32) -> io::Result<()> {
    let stat = rustix::fs::fstat(dir)?;
    if stat.st_mode & 0o7777 != mode {
        rustix::fs::fchmod(dir, Mode::from_raw_mode(mode))?;
    }
    Ok(())
}
