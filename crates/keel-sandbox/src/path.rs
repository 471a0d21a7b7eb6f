//! The path sandbox: which paths a tool may read and write, and race-free opening beneath
//! the workspace root.
//!
//! A path is checked in two steps. First it is resolved the way the kernel would resolve it,
//! symlink by symlink (dangling ones too), so a link inside the root that points outside is
//! caught; paths that do not exist yet are checked through their deepest existing ancestor.
//! Then it is opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS)` relative to a descriptor of the root, along the already resolved
//! path: a symlink swapped in between the check and the open makes the open fail instead of
//! escaping. On kernels without `openat2` the open falls back to `O_NOFOLLOW` on the last
//! component (check-then-open).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::error::SandboxError;

mod atomic;

/// The longest path the OS takes.
const MAX_PATH: usize = 4096;
/// The longest file name the OS takes.
const MAX_NAME: usize = 255;
/// Symlinks followed before giving up, as Linux does.
const MAX_SYMLINKS: usize = 40;

/// Set once `openat2` has answered `ENOSYS`.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// What an operation will do with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read it: allowed inside the root and the extra read-only roots.
    Read,
    /// Create or change it: allowed inside the root only, never under `.git/`.
    Write,
}

/// A path that passed the checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPath {
    given: String,
    absolute: PathBuf,
    root: PathBuf,
    relative: PathBuf,
    exists: bool,
}

impl ResolvedPath {
    /// The path as the model gave it.
    pub fn given(&self) -> &str {
        &self.given
    }

    /// The absolute path with every symlink resolved.
    pub fn absolute(&self) -> &Path {
        &self.absolute
    }

    /// The root it lies in (the workspace, or an extra read-only root).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path relative to [`root`](Self::root); empty for the root itself.
    pub fn relative(&self) -> &Path {
        &self.relative
    }

    /// Whether something existed there when it was checked.
    pub fn exists(&self) -> bool {
        self.exists
    }
}

/// What [`PathSandbox::write_atomic`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteReport {
    /// Where it wrote.
    pub path: ResolvedPath,
    /// How many bytes.
    pub bytes: usize,
    /// Whether the file is new.
    pub created: bool,
}

/// The workspace root and the extra read-only roots, and the rules for paths inside them.
#[derive(Debug, Clone)]
pub struct PathSandbox {
    root: PathBuf,
    read_roots: Vec<PathBuf>,
}

impl PathSandbox {
    /// A sandbox rooted at `root` (resolved to an absolute path without symlinks; it need not
    /// exist yet).
    pub fn new(root: impl AsRef<Path>) -> Result<Self, SandboxError> {
        let root = absolute_root(root.as_ref())?;
        Ok(Self {
            root,
            read_roots: Vec::new(),
        })
    }

    /// Also allows reading (never writing) below `path`.
    pub fn allow_read(mut self, path: impl AsRef<Path>) -> Result<Self, SandboxError> {
        let path = absolute_root(path.as_ref())?;
        if !self.read_roots.contains(&path) {
            self.read_roots.push(path);
        }
        Ok(self)
    }

    /// The workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The extra read-only roots.
    pub fn read_roots(&self) -> &[PathBuf] {
        &self.read_roots
    }

    /// `path` for output: relative to the root when inside it, else absolute.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }

    /// Checks `given` for `access`. Relative paths are taken from the root.
    pub fn resolve(&self, given: &str, access: Access) -> Result<ResolvedPath, SandboxError> {
        validate(given)?;
        let path = Path::new(given);
        let start = if path.is_absolute() {
            PathBuf::from("/")
        } else {
            self.root.clone()
        };
        let walk = walk(start, path, given)?;
        let roots = std::iter::once(&self.root).chain(match access {
            Access::Read => self.read_roots.iter(),
            Access::Write => [].iter(),
        });
        let Some(root) = roots
            .filter(|root| walk.absolute.starts_with(root))
            .max_by_key(|root| root.as_os_str().len())
        else {
            return Err(if walk.followed_symlink {
                SandboxError::SymlinkOutside {
                    given: given.to_owned(),
                    target: walk.absolute,
                }
            } else {
                SandboxError::Outside {
                    given: given.to_owned(),
                    read: access == Access::Read,
                }
            });
        };
        let relative = walk
            .absolute
            .strip_prefix(root)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        if access == Access::Write
            && relative
                .components()
                .any(|c| c.as_os_str() == std::ffi::OsStr::new(".git"))
        {
            return Err(SandboxError::GitDir {
                given: given.to_owned(),
            });
        }
        Ok(ResolvedPath {
            given: given.to_owned(),
            absolute: walk.absolute,
            root: root.clone(),
            relative,
            exists: walk.exists,
        })
    }

    /// Opens `given` for reading, beneath its root.
    pub fn open_read(&self, given: &str) -> Result<(ResolvedPath, File), SandboxError> {
        let resolved = self.resolve(given, Access::Read)?;
        if !resolved.exists {
            return Err(SandboxError::NotFound {
                given: given.to_owned(),
            });
        }
        let root = open_root(&resolved.root, given)?;
        let fd = open_beneath(
            root.as_fd(),
            &resolved.relative,
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY,
            Mode::empty(),
        )
        .map_err(|errno| open_error(errno, given))?;
        Ok((resolved, File::from(fd)))
    }

    /// Replaces the contents of `given` atomically, creating missing parent directories and
    /// the root; an existing file keeps its permissions. A reader sees the old contents or
    /// the new ones whole, and a process killed midway leaves no temp file: the contents go
    /// into an unnamed file (`O_TMPFILE`) linked in when whole (a new file) or linked under a
    /// temp name and renamed over the target at once. Where the file system has no
    /// `O_TMPFILE`, a named temp `.NAME.keel-PID-N.tmp` is renamed over it, and temps of
    /// keel processes no longer alive in that directory are removed first. A hard link to a
    /// file elsewhere is replaced, never written through.
    pub fn write_atomic(&self, given: &str, contents: &[u8]) -> Result<WriteReport, SandboxError> {
        let resolved = self.resolve(given, Access::Write)?;
        let io = |source: std::io::Error| SandboxError::Io {
            given: given.to_owned(),
            source,
        };
        let (Some(name), parent) = (
            resolved.relative.file_name(),
            resolved.relative.parent().unwrap_or(Path::new("")),
        ) else {
            return Err(io(std::io::Error::other(
                "that is the workspace directory itself, not a file",
            )));
        };
        std::fs::create_dir_all(&resolved.root).map_err(io)?;
        let root = open_root(&resolved.root, given)?;
        let dir = make_dirs_beneath(root, parent, given)?;
        let (mode, created) = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => {
                let kind = rustix::fs::FileType::from_raw_mode(stat.st_mode);
                if kind == rustix::fs::FileType::Symlink {
                    return Err(SandboxError::Raced {
                        given: given.to_owned(),
                    });
                }
                if kind == rustix::fs::FileType::Directory {
                    return Err(io(std::io::Error::other(
                        "that is a directory; give a file path",
                    )));
                }
                (Mode::from_raw_mode(stat.st_mode & 0o7777), false)
            }
            Err(Errno::NOENT) => (Mode::from_raw_mode(0o644), true),
            Err(errno) => return Err(io(errno.into())),
        };
        atomic::replace(dir.as_fd(), name, mode, created, contents).map_err(io)?;
        Ok(WriteReport {
            path: ResolvedPath {
                exists: true,
                ..resolved
            },
            bytes: contents.len(),
            created,
        })
    }
}

/// Checks what can be checked without the file system.
fn validate(given: &str) -> Result<(), SandboxError> {
    if given.is_empty() {
        return Err(SandboxError::Empty);
    }
    if given.contains('\0') {
        return Err(SandboxError::Nul {
            given: given.replace('\0', "\\0"),
        });
    }
    let shortened = || given.chars().take(80).collect::<String>() + "…";
    if given.len() > MAX_PATH {
        return Err(SandboxError::TooLong {
            given: shortened(),
            reason: format!("{} bytes, the limit is {MAX_PATH}", given.len()),
        });
    }
    if let Some(name) = Path::new(given)
        .components()
        .map(Component::as_os_str)
        .find(|name| name.len() > MAX_NAME)
    {
        return Err(SandboxError::TooLong {
            given: shortened(),
            reason: format!("a name of {} bytes, the limit is {MAX_NAME}", name.len()),
        });
    }
    Ok(())
}

/// Where resolving a path led.
struct Walk {
    absolute: PathBuf,
    exists: bool,
    followed_symlink: bool,
}

/// Resolves `path` from `start` component by component, as the kernel would: `..` applies to
/// the resolved path, and every symlink, dangling or not, is followed. After the first
/// missing component the rest is applied lexically.
fn walk(start: PathBuf, path: &Path, given: &str) -> Result<Walk, SandboxError> {
    let mut current = start;
    let mut queue: VecDeque<OsString> = components(path);
    let mut exists = true;
    let mut followed_symlink = false;
    let mut hops = 0;
    while let Some(name) = queue.pop_front() {
        if name == "." {
            continue;
        }
        if name == ".." {
            current.pop();
            continue;
        }
        let next = current.join(&name);
        if !exists {
            current = next;
            continue;
        }
        match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                hops += 1;
                if hops > MAX_SYMLINKS {
                    return Err(SandboxError::SymlinkLoop {
                        given: given.to_owned(),
                    });
                }
                let target = std::fs::read_link(&next).map_err(|source| SandboxError::Io {
                    given: given.to_owned(),
                    source,
                })?;
                followed_symlink = true;
                if target.is_absolute() {
                    current = PathBuf::from("/");
                }
                let mut expanded = components(&target);
                expanded.extend(queue);
                queue = expanded;
            }
            Ok(_) => current = next,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                exists = false;
                current = next;
            }
            Err(source) => {
                return Err(SandboxError::Io {
                    given: given.to_owned(),
                    source,
                });
            }
        }
    }
    Ok(Walk {
        absolute: current,
        exists,
        followed_symlink,
    })
}

fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some("..".into()),
            Component::CurDir => Some(".".into()),
            Component::RootDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// `root` made absolute, with symlinks resolved as far as it exists.
fn absolute_root(root: &Path) -> Result<PathBuf, SandboxError> {
    let given = root.display().to_string();
    validate(&given)?;
    let absolute = if root.is_absolute() {
        root.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|source| SandboxError::Io {
                given: given.clone(),
                source,
            })?
            .join(root)
    };
    Ok(walk(PathBuf::from("/"), &absolute, &given)?.absolute)
}

fn open_root(root: &Path, given: &str) -> Result<OwnedFd, SandboxError> {
    rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|errno| open_error(errno, given))
}

/// Opens `relative` (already resolved, so free of symlinks) beneath `dir`: a symlink swapped
/// in since makes the open fail (`ELOOP`/`EXDEV`) instead of escaping.
pub(crate) fn open_beneath(
    dir: BorrowedFd<'_>,
    relative: &Path,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, Errno> {
    let relative = if relative.as_os_str().is_empty() {
        Path::new(".")
    } else {
        relative
    };
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        match rustix::fs::openat2(dir, relative, flags, mode, resolve) {
            Err(Errno::NOSYS) => NO_OPENAT2.store(true, Ordering::Relaxed),
            Err(Errno::AGAIN) => {
                // openat2 asks for a retry when a rename raced the lookup.
                return rustix::fs::openat2(dir, relative, flags, mode, resolve);
            }
            other => return other,
        }
    }
    rustix::fs::openat(dir, relative, flags | OFlags::NOFOLLOW, mode)
}

fn open_error(errno: Errno, given: &str) -> SandboxError {
    match errno {
        // EXDEV: the lookup tried to leave the root; ELOOP: a symlink where none was.
        Errno::XDEV | Errno::LOOP => SandboxError::Raced {
            given: given.to_owned(),
        },
        Errno::NOENT => SandboxError::NotFound {
            given: given.to_owned(),
        },
        other => SandboxError::Io {
            given: given.to_owned(),
            source: other.into(),
        },
    }
}

/// Creates the directories of `relative` one by one beneath `root`, never through a symlink,
/// and returns a descriptor of the last.
fn make_dirs_beneath(root: OwnedFd, relative: &Path, given: &str) -> Result<OwnedFd, SandboxError> {
    let mut dir = root;
    for name in relative.components().map(Component::as_os_str) {
        match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(errno) => return Err(open_error(errno, given)),
        }
        dir = open_beneath(
            dir.as_fd(),
            Path::new(name),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| match errno {
            Errno::NOTDIR => SandboxError::Io {
                given: given.to_owned(),
                source: std::io::Error::other(format!(
                    "{} is a file, not a directory",
                    Path::new(name).display()
                )),
            },
            other => open_error(other, given),
        })?;
    }
    Ok(dir)
}
