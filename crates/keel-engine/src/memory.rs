//! Memory files, loaded the way Claude Code loads them: the user's own instruction files, then
//! in every directory from the project root down to the working directory `AGENTS.md`,
//! `CLAUDE.md`, `.claude/CLAUDE.md` and `CLAUDE.local.md`, each followed by the files it
//! imports with `@path` lines.
//!
//! [`load_memory`] never fails: what cannot be loaded is left out and recorded in
//! [`Memory::skipped`] with the reason, so that a host can show it (the REPL's `/memory`,
//! through [`MemoryReport`]).
//!
//! # Trust
//! User-level files ([`MemorySources::user_files`]: `~/.claude/CLAUDE.md`,
//! `$KEEL_HOME/AGENTS.md`) are the user's own: they may live anywhere, and may import any file,
//! `@~/notes.md` too. Everything in the project is untrusted repository content: a project
//! file is read only if its resolved path lies inside the project root, and it may import only
//! files whose resolved path lies inside the root or an [`MemorySources::extra_readable`]
//! root; `@~/…` imports from it are refused, and so is any symlink leading out. A file a user
//! file imports from inside the project root counts as project content for its own imports.
//!
//! # Imports
//! A line's `@path` (at the line's start or after whitespace, outside code spans and fenced
//! code blocks) imports `path`, relative to the importing file's directory, absolute, or
//! (user files only) `~/`-relative. A space in a path is written `\ `; a `#fragment` and
//! trailing punctuation (`.,;:!?)]}'"`) are dropped. Imported files follow their importer, in
//! the order of their `@` lines, at most [`MAX_IMPORT_DEPTH`] hops from a top-level file; the
//! `@` line itself stays in the importer's text. A file already loaded (an import cycle, the
//! same file under two names, `CLAUDE.md` a symlink to `AGENTS.md`) is loaded once. At most
//! [`MAX_IMPORTS`] imports are followed in all.
//!
//! # Limits
//! Each file is cut to [`MAX_INSTRUCTION_CHARS`]
//! characters, and all of them together to [`MAX_MEMORY_CHARS`], with a note in the text
//! where one is cut; files after the total is reached are skipped (and listed so).
//!
//! ```
//! use keel_engine::memory::{MemorySource, MemorySources, load_memory};
//!
//! let dir = tempfile::tempdir()?;
//! std::fs::write(dir.path().join("AGENTS.md"), "Run the tests.\n@docs/style.md\n")?;
//! std::fs::create_dir(dir.path().join("docs"))?;
//! std::fs::write(dir.path().join("docs/style.md"), "Four spaces.\n")?;
//! std::fs::write(dir.path().join("CLAUDE.local.md"), "My own notes.\n")?;
//!
//! let memory = load_memory(&MemorySources::new(dir.path(), dir.path()));
//! let loaded: Vec<_> = memory.files.iter().map(|f| (f.path.to_str().unwrap(), f.source)).collect();
//! assert_eq!(loaded, [
//!     ("AGENTS.md", MemorySource::Project),
//!     ("docs/style.md", MemorySource::Import),
//!     ("CLAUDE.local.md", MemorySource::Local),
//! ]);
//! assert!(memory.skipped.is_empty());
//! # Ok::<(), std::io::Error>(())
//! ```

use std::collections::HashMap;
use std::fmt;
use std::path::{Component, Path, PathBuf};

use crate::prompt::{InstructionFile, MAX_INSTRUCTION_CHARS};

/// The most `@` hops from a top-level memory file to a file it imports (Claude Code's limit).
pub const MAX_IMPORT_DEPTH: usize = 5;

/// The most characters of all memory files together put in the prompt. A file crossing it is
/// cut with a note; the files after it are skipped ([`SkipReason::TotalLimit`]).
pub const MAX_MEMORY_CHARS: usize = 60_000;

/// The most `@` imports followed for one prompt, all files together; the rest are skipped
/// with one note ([`SkipReason::TooManyImports`]).
pub const MAX_IMPORTS: usize = 64;

/// The most bytes read of one memory file (a larger one is cut anyway).
const MAX_READ_BYTES: u64 = 1 << 20;

/// The memory files looked for in each directory from the project root to the working
/// directory, in the order they are loaded, with their kind.
pub const PROJECT_FILE_NAMES: [(&str, MemorySource); 4] = [
    ("AGENTS.md", MemorySource::Project),
    ("CLAUDE.md", MemorySource::Project),
    (".claude/CLAUDE.md", MemorySource::Project),
    ("CLAUDE.local.md", MemorySource::Local),
];

/// Where memory files are looked for. The engine reads no environment: a host fills in the
/// user-level files and the home directory (the `keel` facade: `~/.claude/CLAUDE.md` and
/// `$KEEL_HOME/AGENTS.md`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemorySources {
    /// The user's own memory files, loaded first in this order; missing ones are left out.
    /// Trusted: they may lie anywhere and import anything.
    pub user_files: Vec<PathBuf>,
    /// The user's home directory, what `@~/…` in a user file means; `None`: such imports
    /// are skipped.
    pub user_home: Option<PathBuf>,
    /// The project root (the repository's work tree): project files must resolve inside it.
    pub root: PathBuf,
    /// The working directory, inside `root`: every directory from `root` down to it is looked
    /// in. Outside `root`, only `root` is.
    pub cwd: PathBuf,
    /// Roots besides `root` a project file may import from (the session's allow-read paths).
    pub extra_readable: Vec<PathBuf>,
}

impl MemorySources {
    /// The project's files only: no user-level files, no home, no extra roots.
    pub fn new(root: impl Into<PathBuf>, cwd: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            cwd: cwd.into(),
            ..Self::default()
        }
    }
}

/// What kind of memory file an [`InstructionFile`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemorySource {
    /// The user's own, for every project (`~/.claude/CLAUDE.md`, `$KEEL_HOME/AGENTS.md`).
    User,
    /// The project's, checked in (`AGENTS.md`, `CLAUDE.md`, `.claude/CLAUDE.md`).
    Project,
    /// The user's private instructions for this project (`CLAUDE.local.md`).
    Local,
    /// A file another one imports with an `@path` line.
    Import,
}

impl MemorySource {
    /// A short lowercase name: `user`, `project`, `local`, `import`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Project => "project",
            Self::Local => "local",
            Self::Import => "import",
        }
    }
}

impl fmt::Display for MemorySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a memory file was not loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// An imported file that does not exist (or a dangling symlink).
    NotFound,
    /// A project file or a project file's import whose resolved path lies outside the project
    /// root and every extra readable root.
    OutsideProject {
        /// Where it resolved (or, when it could not be resolved, the path as written, made
        /// absolute).
        resolved: PathBuf,
    },
    /// A `@~/…` import in a project file: only user-level files may import from the home
    /// directory.
    HomeImportFromProject,
    /// A `@~/…` import in a user file with no home directory known.
    NoHome,
    /// An import more than [`MAX_IMPORT_DEPTH`] hops from a top-level file.
    TooDeep,
    /// An import of a file that is importing it (directly or through others).
    Cycle,
    /// The same file (by device and inode) was already loaded under another path.
    Duplicate {
        /// The path it was loaded as.
        of: PathBuf,
    },
    /// Not a regular file (a directory, a FIFO, a device).
    NotAFile,
    /// A binary file (it holds NUL bytes).
    Binary,
    /// All memory files together reached [`MAX_MEMORY_CHARS`].
    TotalLimit,
    /// More than [`MAX_IMPORTS`] imports: this one and the rest were not followed.
    TooManyImports,
    /// It could not be read.
    Unreadable(String),
}

impl SkipReason {
    /// Whether this is a refusal worth a warning (a path leading where it may not, an import
    /// chain too deep or too long) rather than something merely absent or already loaded.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Self::OutsideProject { .. }
                | Self::HomeImportFromProject
                | Self::TooDeep
                | Self::TooManyImports
                | Self::TotalLimit
        )
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotFound => f.write_str("not found"),
            Self::OutsideProject { resolved } => write!(
                f,
                "refused: it resolves to {}, outside the project (a project file may only \
                 load files inside the project root or an allow-read path)",
                resolved.display()
            ),
            Self::HomeImportFromProject => f.write_str(
                "refused: only user-level memory files (~/.claude/CLAUDE.md, \
                 $KEEL_HOME/AGENTS.md) may import from the home directory",
            ),
            Self::NoHome => f.write_str("the home directory is not known"),
            Self::TooDeep => write!(
                f,
                "not followed: imports go at most {MAX_IMPORT_DEPTH} levels deep"
            ),
            Self::Cycle => f.write_str("not followed: an import cycle"),
            Self::Duplicate { of } => write!(f, "the same file as {}, loaded once", of.display()),
            Self::NotAFile => f.write_str("not a regular file"),
            Self::Binary => f.write_str("a binary file"),
            Self::TotalLimit => write!(
                f,
                "not loaded: the memory files' total limit of {MAX_MEMORY_CHARS} characters \
                 is reached"
            ),
            Self::TooManyImports => write!(
                f,
                "not followed, nor any later import: at most {MAX_IMPORTS} imports are followed"
            ),
            Self::Unreadable(error) => write!(f, "cannot be read: {error}"),
        }
    }
}

/// A memory file that was not loaded, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedMemory {
    /// The path shown to the user: absolute outside the project, relative to the project root
    /// inside it; for an import, the path written after `@` resolved against the importer's
    /// directory (`~/…` for a home import refused).
    pub path: PathBuf,
    /// What kind of file it would have been.
    pub source: MemorySource,
    /// The file whose `@` line named it (its shown path); `None` for a top-level file.
    pub imported_from: Option<PathBuf>,
    /// Why it was not loaded.
    pub reason: SkipReason,
}

impl fmt::Display for SkippedMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(from) = &self.imported_from {
            write!(f, " (imported by {})", from.display())?;
        }
        write!(f, ": {}", self.reason)
    }
}

/// The memory files [`load_memory`] loaded and the ones it skipped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Memory {
    /// The files loaded, in prompt order: user files, then each directory's from the root
    /// down, each file followed by its imports.
    pub files: Vec<InstructionFile>,
    /// What was not loaded and why, in the order met.
    pub skipped: Vec<SkippedMemory>,
}

/// One loaded memory file, without its text: a line of the `/memory` listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedMemory {
    /// Its path as shown ([`InstructionFile::path`]).
    pub path: PathBuf,
    /// Its kind.
    pub source: MemorySource,
    /// The file that imported it.
    pub imported_from: Option<PathBuf>,
    /// Its size on disk, in bytes.
    pub bytes: u64,
    /// The characters of it in the prompt (after any cut).
    pub chars: usize,
    /// Whether it was cut.
    pub truncated: bool,
}

/// What a session's prompt was given from memory files: what a REPL's `/memory` lists.
/// Its [`Display`](fmt::Display) is that listing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemoryReport {
    /// The files loaded, in prompt order.
    pub loaded: Vec<LoadedMemory>,
    /// What was skipped and why.
    pub skipped: Vec<SkippedMemory>,
}

impl MemoryReport {
    /// The report of `files` loaded and `skipped`.
    pub fn new(files: &[InstructionFile], skipped: &[SkippedMemory]) -> Self {
        Self {
            loaded: files
                .iter()
                .map(|file| LoadedMemory {
                    path: file.path.clone(),
                    source: file.source,
                    imported_from: file.imported_from.clone(),
                    bytes: file.bytes,
                    chars: file.content.chars().count(),
                    truncated: file.truncated,
                })
                .collect(),
            skipped: skipped.to_vec(),
        }
    }

    /// The skipped entries that are refusals ([`SkipReason::is_refusal`]), one line each:
    /// what a host may show as warnings when a session starts.
    pub fn refusals(&self) -> Vec<String> {
        self.skipped
            .iter()
            .filter(|skipped| skipped.reason.is_refusal())
            .map(|skipped| format!("memory file {skipped}"))
            .collect()
    }
}

impl fmt::Display for MemoryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.loaded.is_empty() {
            writeln!(f, "No memory files loaded.")?;
        } else {
            writeln!(f, "Memory files loaded ({}):", self.loaded.len())?;
            for file in &self.loaded {
                write!(f, "  {}  ({}", file.path.display(), file.source)?;
                if let Some(from) = &file.imported_from {
                    write!(f, " by {}", from.display())?;
                }
                write!(f, ", {} bytes", file.bytes)?;
                if file.truncated {
                    write!(f, ", cut to {} characters", file.chars)?;
                }
                writeln!(f, ")")?;
            }
        }
        if !self.skipped.is_empty() {
            writeln!(f, "Skipped ({}):", self.skipped.len())?;
            for skipped in &self.skipped {
                writeln!(f, "  {skipped}")?;
            }
        }
        Ok(())
    }
}

/// Loads the memory files of `sources` (see the [module docs](self)). Never fails: what
/// cannot be loaded is in [`Memory::skipped`].
pub fn load_memory(sources: &MemorySources) -> Memory {
    let root = canonical(&sources.root);
    let mut readable = vec![root.clone()];
    readable.extend(sources.extra_readable.iter().map(|path| canonical(path)));
    let mut loader = Loader {
        root: root.clone(),
        readable,
        home: sources.user_home.clone(),
        seen: HashMap::new(),
        stack: Vec::new(),
        chars_left: MAX_MEMORY_CHARS,
        imports_left: MAX_IMPORTS,
        memory: Memory::default(),
    };

    for path in &sources.user_files {
        if path.symlink_metadata().is_err() {
            continue;
        }
        loader.load(Candidate {
            path: path.clone(),
            shown: path.clone(),
            source: MemorySource::User,
            trusted: true,
            imported_from: None,
            depth: 0,
        });
    }

    let cwd = canonical(&sources.cwd);
    let mut dirs = vec![(root.clone(), PathBuf::new())];
    match cwd.strip_prefix(&root) {
        Ok(relative) => {
            let mut dir = root.clone();
            let mut shown = PathBuf::new();
            for component in relative.components() {
                dir.push(component);
                shown.push(component);
                dirs.push((dir.clone(), shown.clone()));
            }
        }
        Err(_) => tracing::debug!(
            cwd = %sources.cwd.display(),
            root = %sources.root.display(),
            "working directory is outside the project root; its memory files are not read"
        ),
    }
    for (dir, shown) in dirs {
        for (name, source) in PROJECT_FILE_NAMES {
            let path = dir.join(name);
            // Absent is not worth a note; a dangling or hostile symlink is.
            if path.symlink_metadata().is_err() {
                continue;
            }
            loader.load(Candidate {
                path,
                shown: shown.join(name),
                source,
                trusted: false,
                imported_from: None,
                depth: 0,
            });
        }
    }
    loader.memory
}

/// `path` with symlinks resolved, or as it is when it cannot be (it does not exist).
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| normalize(path))
}

/// `path` with `.` and `..` components resolved lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// A memory file to load.
struct Candidate {
    /// Where to open it.
    path: PathBuf,
    /// How to show it.
    shown: PathBuf,
    source: MemorySource,
    /// A user file, or one a trusted file imports from outside the project root.
    trusted: bool,
    imported_from: Option<PathBuf>,
    /// Hops from its top-level file.
    depth: usize,
}

/// A file opened for reading.
struct Opened {
    file: std::fs::File,
    /// Where it resolved.
    resolved: PathBuf,
    /// Its device and inode.
    id: (u64, u64),
    /// Its size.
    len: u64,
}

struct Loader {
    /// The project root, canonical.
    root: PathBuf,
    /// Where untrusted files may resolve: the root and the extra readable roots, canonical.
    readable: Vec<PathBuf>,
    home: Option<PathBuf>,
    /// The files loaded by (device, inode), with their shown paths.
    seen: HashMap<(u64, u64), PathBuf>,
    /// The files being loaded (a file and its importers).
    stack: Vec<(u64, u64)>,
    chars_left: usize,
    imports_left: usize,
    memory: Memory,
}

impl Loader {
    fn skip(&mut self, candidate: &Candidate, reason: SkipReason) {
        tracing::debug!(path = %candidate.path.display(), %reason, "memory file skipped");
        self.memory.skipped.push(SkippedMemory {
            path: candidate.shown.clone(),
            source: candidate.source,
            imported_from: candidate.imported_from.clone(),
            reason,
        });
    }

    /// Loads `candidate` and, after it, what it imports.
    fn load(&mut self, candidate: Candidate) {
        let opened = match self.open(&candidate) {
            Ok(opened) => opened,
            Err(reason) => return self.skip(&candidate, reason),
        };
        if self.stack.contains(&opened.id) {
            return self.skip(&candidate, SkipReason::Cycle);
        }
        if let Some(of) = self.seen.get(&opened.id) {
            let of = of.clone();
            return self.skip(&candidate, SkipReason::Duplicate { of });
        }
        if self.chars_left == 0 {
            return self.skip(&candidate, SkipReason::TotalLimit);
        }
        let bytes = match read_capped(opened.file) {
            Ok(bytes) => bytes,
            Err(error) => return self.skip(&candidate, SkipReason::Unreadable(error.to_string())),
        };
        if bytes.contains(&0) {
            return self.skip(&candidate, SkipReason::Binary);
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let whole = opened.len <= MAX_READ_BYTES;
        let (content, chars, truncated) = self.cap(text, whole, opened.len);
        self.chars_left = self.chars_left.saturating_sub(chars);
        let imports = imports(&content);
        self.seen.insert(opened.id, candidate.shown.clone());
        self.memory.files.push(InstructionFile {
            path: candidate.shown.clone(),
            content,
            source: candidate.source,
            imported_from: candidate.imported_from.clone(),
            bytes: opened.len,
            truncated,
        });

        // What this file imports is trusted only if it is the user's and lies outside the
        // project (a user file's import of repository content counts as repository content).
        // A top-level user file keeps its trust wherever it is (the user named it).
        let trusted =
            candidate.trusted && (candidate.depth == 0 || !opened.resolved.starts_with(&self.root));
        let base = candidate
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        self.stack.push(opened.id);
        for written in imports {
            let import = self.import(&written, &base, &candidate, trusted);
            let Some(import) = import else { continue };
            if candidate.depth >= MAX_IMPORT_DEPTH {
                self.skip(&import, SkipReason::TooDeep);
                continue;
            }
            if self.imports_left == 0 {
                self.skip(&import, SkipReason::TooManyImports);
                break;
            }
            self.imports_left -= 1;
            self.load(import);
        }
        self.stack.pop();
    }

    /// The candidate `@written` in `importer` (whose directory is `base`) names, or `None`
    /// (with a note) when it cannot be one.
    fn import(
        &mut self,
        written: &str,
        base: &Path,
        importer: &Candidate,
        trusted: bool,
    ) -> Option<Candidate> {
        let mut candidate = Candidate {
            path: PathBuf::from(written),
            shown: PathBuf::from(written),
            source: MemorySource::Import,
            trusted,
            imported_from: Some(importer.shown.clone()),
            depth: importer.depth + 1,
        };
        let path = if let Some(rest) = written.strip_prefix("~/") {
            if !trusted {
                self.skip(&candidate, SkipReason::HomeImportFromProject);
                return None;
            }
            let Some(home) = &self.home else {
                self.skip(&candidate, SkipReason::NoHome);
                return None;
            };
            home.join(rest)
        } else {
            base.join(written)
        };
        let path = normalize(&path);
        candidate.shown = match path.strip_prefix(&self.root) {
            Ok(relative) => relative.to_path_buf(),
            Err(_) => path.clone(),
        };
        candidate.path = path;
        Some(candidate)
    }

    /// Opens `candidate` for reading: a regular file, and for an untrusted one, resolving
    /// inside a readable root (checked before opening, so that nothing outside is even
    /// opened, and again on the opened file, so that a symlink swapped in between is caught).
    fn open(&self, candidate: &Candidate) -> Result<Opened, SkipReason> {
        use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
        use std::os::unix::io::AsRawFd as _;

        if !candidate.trusted {
            let resolved = match std::fs::canonicalize(&candidate.path) {
                Ok(resolved) => resolved,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    // Missing, or a dangling symlink: where would it lead?
                    let lexical = normalize(&candidate.path);
                    if !self.is_readable(&lexical) {
                        return Err(SkipReason::OutsideProject { resolved: lexical });
                    }
                    return Err(SkipReason::NotFound);
                }
                Err(error) => return Err(SkipReason::Unreadable(error.to_string())),
            };
            if !self.is_readable(&resolved) {
                return Err(SkipReason::OutsideProject { resolved });
            }
        }
        // Non-blocking, so that a FIFO swapped in cannot stall the session's start.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&candidate.path)
            .map_err(|error| match error.kind() {
                std::io::ErrorKind::NotFound => SkipReason::NotFound,
                _ => SkipReason::Unreadable(error.to_string()),
            })?;
        let resolved = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .or_else(|_| std::fs::canonicalize(&candidate.path))
            .map_err(|error| SkipReason::Unreadable(error.to_string()))?;
        if !candidate.trusted && !self.is_readable(&resolved) {
            return Err(SkipReason::OutsideProject { resolved });
        }
        let metadata = file
            .metadata()
            .map_err(|error| SkipReason::Unreadable(error.to_string()))?;
        if !metadata.is_file() {
            return Err(SkipReason::NotAFile);
        }
        Ok(Opened {
            file,
            resolved,
            id: (metadata.dev(), metadata.ino()),
            len: metadata.len(),
        })
    }

    /// Whether `path` (resolved) lies inside a readable root.
    fn is_readable(&self, path: &Path) -> bool {
        self.readable.iter().any(|root| path.starts_with(root))
    }

    /// `text` cut to the per-file and the total limits, with a note when cut; its characters
    /// (the note's not counted) and whether it was cut. `whole`: `text` is the whole file of
    /// `len` bytes.
    fn cap(&self, text: String, whole: bool, len: u64) -> (String, usize, bool) {
        let limit = MAX_INSTRUCTION_CHARS.min(self.chars_left);
        let cut_at = text.char_indices().nth(limit).map(|(end, _)| end);
        match (cut_at, whole) {
            (None, true) => {
                let chars = text.chars().count();
                (text, chars, false)
            }
            (cut, _) => {
                let end = cut.unwrap_or(text.len());
                let shown = text[..end].chars().count();
                let of = if whole {
                    format!("{} characters", text.chars().count())
                } else {
                    format!("a {len}-byte file")
                };
                let why = if limit < MAX_INSTRUCTION_CHARS {
                    format!(
                        "; the memory files' total limit of {MAX_MEMORY_CHARS} characters is \
                         reached"
                    )
                } else {
                    String::new()
                };
                let content = format!(
                    "{}\n[truncated: showing the first {shown} of {of}{why}]",
                    &text[..end]
                );
                (content, shown, true)
            }
        }
    }
}

/// At most [`MAX_READ_BYTES`] of `file`.
fn read_capped(file: std::fs::File) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    file.take(MAX_READ_BYTES).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The paths `text` imports with `@path`, in order: each `@` at a line's start or after
/// whitespace, outside code spans and fenced code blocks.
///
/// ```
/// let text = "See @README.md and @docs/git.md.\n`@not/this` me@example.com\n\
///             ```\n@nor/this\n```\n@~/notes.md\n@my\\ file.md#part";
/// assert_eq!(
///     keel_engine::memory::imports(text),
///     ["README.md", "docs/git.md", "~/notes.md", "my file.md"]
/// );
/// ```
pub fn imports(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    // The open fence: its character and length.
    let mut fence: Option<(char, usize)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start_matches(' ');
        let indent = line.len() - trimmed.len();
        let run = |c: char| trimmed.chars().take_while(|&x| x == c).count();
        if indent <= 3 {
            if let Some((c, len)) = fence {
                if run(c) >= len && trimmed.trim_start_matches(c).trim().is_empty() {
                    fence = None;
                }
                continue;
            }
            let opening = ['`', '~']
                .into_iter()
                .map(|c| (c, run(c)))
                .find(|&(_, len)| len >= 3);
            if let Some((c, len)) = opening
                && !(c == '`' && trimmed[len..].contains('`'))
            {
                fence = Some((c, len));
                continue;
            }
        } else if fence.is_some() {
            continue;
        }
        line_imports(line, &mut found);
    }
    found
}

/// The `@path`s of one line outside code spans, added to `found`.
fn line_imports(line: &str, found: &mut Vec<String>) {
    let bytes = line.as_bytes();
    let mut i = 0;
    let mut previous_space = true;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'`' {
            let run = bytes[i..].iter().take_while(|&&x| x == b'`').count();
            // The span ends at the next run of exactly as many backticks; without one the
            // backticks are plain text.
            if let Some(end) = closing_run(&bytes[i + run..], run) {
                i += run + end + run;
            } else {
                i += run;
            }
            previous_space = false;
            continue;
        }
        if b == b'@' && previous_space {
            let (path, len) = import_token(&line[i + 1..]);
            if let Some(path) = path {
                found.push(path);
            }
            i += 1 + len;
            previous_space = false;
            continue;
        }
        previous_space = b.is_ascii_whitespace();
        i += 1;
    }
}

/// Where in `rest` a run of exactly `run` backticks starts.
fn closing_run(rest: &[u8], run: usize) -> Option<usize> {
    let mut i = 0;
    while i < rest.len() {
        if rest[i] == b'`' {
            let len = rest[i..].iter().take_while(|&&x| x == b'`').count();
            if len == run {
                return Some(i);
            }
            i += len;
        } else {
            i += 1;
        }
    }
    None
}

/// The path after an `@` (its token up to unescaped whitespace, unescaped, without a
/// `#fragment` or trailing punctuation) if it looks like one, and the token's length in bytes.
fn import_token(rest: &str) -> (Option<String>, usize) {
    let mut path = String::new();
    let mut chars = rest.char_indices().peekable();
    let mut len = rest.len();
    while let Some((at, c)) = chars.next() {
        if c == '\\'
            && let Some(&(_, next)) = chars.peek()
            && next == ' '
        {
            path.push(' ');
            chars.next();
            continue;
        }
        if c.is_whitespace() {
            len = at;
            break;
        }
        path.push(c);
    }
    if let Some(hash) = path.find('#') {
        path.truncate(hash);
    }
    let kept = path
        .trim_end_matches(['.', ',', ';', ':', '!', '?', ')', ']', '}', '\'', '"'])
        .len();
    // `@..` and `@.` stay as they are: trimming them would leave nothing.
    if kept > 0 {
        path.truncate(kept);
    }
    let looks_like_a_path = path
        .chars()
        .next()
        .is_some_and(|c| c.is_alphanumeric() || matches!(c, '.' | '/' | '~' | '_' | '-'))
        && path != "/"
        && path != "~"
        && path != "."
        && path != "..";
    (looks_like_a_path.then_some(path), len)
}
