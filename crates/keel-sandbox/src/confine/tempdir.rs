//! The per-session temp dir commands get as `TMPDIR`: created `0700`, owned by this user,
//! never reached through a symlink or a directory another user could swap.

use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

/// The session temp dir at `dir`, made ready: its parent is created if missing and must be
/// safe (every ancestor a directory owned by this user or root, and writable by others only
/// with the sticky bit, like `/tmp`); `dir` itself is created `0700` if missing, must not be a
/// symlink and must be owned by this user, and loses any group or other permission. Returns
/// its resolved path and an open descriptor of it (the Landlock rule is bound to that
/// descriptor, so a directory swapped in later gains nothing).
pub(crate) fn prepare(dir: &Path) -> Result<(PathBuf, OwnedFd), String> {
    let fail = |what: &str, err: &dyn std::fmt::Display| {
        format!("the session temp dir {}: {what}: {err}", dir.display())
    };
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Err(fail("not a directory path", &"no parent"));
    };
    std::fs::create_dir_all(parent).map_err(|err| fail("creating its parent", &err))?;
    let parent = std::fs::canonicalize(parent).map_err(|err| fail("resolving its parent", &err))?;
    check_ancestors(&parent).map_err(|err| fail("unsafe parent", &err))?;
    let parent_fd = rustix::fs::open(
        &parent,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|err| fail("opening its parent", &err))?;
    match rustix::fs::mkdirat(&parent_fd, name, Mode::from_raw_mode(0o700)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(err) => return Err(fail("creating it", &err)),
    }
    let fd = rustix::fs::openat(
        &parent_fd,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|err| fail("opening it (it must be a directory, not a symlink)", &err))?;
    let stat = rustix::fs::fstat(&fd).map_err(|err| fail("checking it", &err))?;
    if stat.st_uid != rustix::process::geteuid().as_raw() {
        return Err(fail("checking it", &"owned by another user"));
    }
    if stat.st_mode & 0o077 != 0 {
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o700))
            .map_err(|err| fail("making it private", &err))?;
    }
    Ok((parent.join(name), fd))
}

/// Checks that no other user can replace `dir` or any of its ancestors.
fn check_ancestors(dir: &Path) -> Result<(), String> {
    let me = rustix::process::geteuid().as_raw();
    for ancestor in dir.ancestors() {
        let meta = std::fs::symlink_metadata(ancestor)
            .map_err(|err| format!("{}: {err}", ancestor.display()))?;
        if !meta.is_dir() {
            return Err(format!("{} is not a directory", ancestor.display()));
        }
        if meta.uid() != me && meta.uid() != 0 {
            return Err(format!(
                "{} is owned by another user ({})",
                ancestor.display(),
                meta.uid()
            ));
        }
        if meta.mode() & 0o022 != 0 && meta.mode() & 0o1000 == 0 {
            return Err(format!(
                "{} may be changed by other users (mode {:o})",
                ancestor.display(),
                meta.mode() & 0o7777
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dir_is_private_and_never_a_symlink() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("scratch/tmp");
        let (path, _fd) = prepare(&dir).unwrap();
        assert!(path.ends_with("scratch/tmp"));
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o700);
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
        prepare(&dir).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o700);

        let elsewhere = base.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let link = base.path().join("scratch/link");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        let err = prepare(&link).unwrap_err();
        assert!(err.contains("not a symlink"), "{err}");

        let open = base.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
        let err = prepare(&open.join("tmp")).unwrap_err();
        assert!(err.contains("may be changed by other users"), "{err}");
    }
}
