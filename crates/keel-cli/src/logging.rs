//! The log file: what keel's libraries trace (runs, turns, model calls, tool calls, retries,
//! snapshots), written to `$KEEL_HOME/logs/keel.log` when `KEEL_LOG` (an `EnvFilter`
//! directive such as `debug` or `keel_provider=trace`) or `--debug` asks for it.
//!
//! With neither, nothing is set up: no subscriber, no file, no directory read, so a run that
//! does not log pays one environment lookup. Lines never go to the terminal (the REPL owns
//! it; `keel exec`'s stderr is its progress). The directory is made 0700 and the file 0600;
//! at 10 MiB the file is renamed `keel.log.1` (the older ones `.2`, `.3`; the oldest is
//! dropped), so the logs take about 40 MiB at most (several keel processes, a session and
//! its tasks' supervisors, append to one file; each counts its own writes, so a file may
//! pass the limit by what the others wrote). Every line is scrubbed of the values of the
//! environment's key-like variables (`*_API_KEY`, `*_TOKEN`, ...) and of the provider's key
//! variable, whatever a library put in a field.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError, RwLock};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

/// The variable holding the filter.
pub(crate) const LOG_VAR: &str = "KEEL_LOG";

/// What `--debug` logs: keel's crates (every target starting with `keel`) at debug, the
/// libraries below them at warn.
const DEBUG_FILTER: &str = "warn,keel=debug";

/// The size at which the file is rotated.
const MAX_BYTES: u64 = 10 * 1024 * 1024;

/// How many rotated files are kept (`keel.log.1` ... `keel.log.3`).
const KEEP: u32 = 3;

/// What stands for a scrubbed secret.
const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are not scrubbed (they would match ordinary words).
const MIN_SECRET_LEN: usize = 8;

/// Values scrubbed from every line, beyond the key-like variables read at start: the
/// provider's key variable when a config names its own ([`redact_var`]).
static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Starts logging if `KEEL_LOG` is set or `debug` (`--debug`) is; `KEEL_LOG` wins over
/// `--debug`. Returns a line for stderr when logging was asked for and cannot be done (a bad
/// filter, a file that cannot be opened); the run goes on without logs.
pub(crate) fn init(debug: bool) -> Option<String> {
    let directive = match std::env::var(LOG_VAR) {
        Ok(value) if !value.trim().is_empty() => value,
        _ if debug => DEBUG_FILTER.to_owned(),
        _ => return None,
    };
    let filter = match EnvFilter::builder().parse(&directive) {
        Ok(filter) => filter,
        Err(err) => {
            return Some(format!(
                "warning: {LOG_VAR}={directive:?} is not a filter ({err}): not logging; \
                 try {LOG_VAR}=debug"
            ));
        }
    };
    let dir = match keel::home_dir() {
        Ok(home) => home.join("logs"),
        Err(err) => return Some(format!("warning: not logging: {err}")),
    };
    let file = match LogFile::open(&dir) {
        Ok(file) => file,
        Err(err) => {
            return Some(format!(
                "warning: cannot open the log file in {}: {err}; not logging",
                dir.display()
            ));
        }
    };
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(Mutex::new(file))
        .with_ansi(false)
        .with_span_events(FmtSpan::NEW | FmtSpan::CLOSE)
        .finish();
    tracing::subscriber::set_global_default(subscriber)
        .err()
        .map(|err| format!("warning: not logging: {err}"))
}

/// Scrubs the value of variable `name` from the log from now on (the provider's key, when a
/// config names a variable the key-like patterns miss).
pub(crate) fn redact_var(name: &str) {
    if let Some(value) = std::env::var(name)
        .ok()
        .filter(|value| value.trim().len() >= MIN_SECRET_LEN)
    {
        let mut secrets = SECRETS.write().unwrap_or_else(PoisonError::into_inner);
        if !secrets.contains(&value) {
            secrets.push(value);
        }
    }
}

/// Whether variable `name` may hold a secret: its value is scrubbed from the log.
fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    [
        "KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIALS",
    ]
    .iter()
    .any(|word| upper.ends_with(word))
}

/// The log file, rotated when it grows past [`MAX_BYTES`].
struct LogFile {
    /// `…/logs/keel.log`.
    path: PathBuf,
    /// The open file, appended to.
    file: File,
    /// Its size so far.
    size: u64,
    /// The size past which it is rotated ([`MAX_BYTES`]).
    max_bytes: u64,
    /// The values scrubbed from every line, read from the environment at start.
    secrets: Vec<String>,
}

impl LogFile {
    /// Opens (creating them 0700 and 0600) `dir` and `dir/keel.log` for appending.
    fn open(dir: &Path) -> io::Result<Self> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let path = dir.join("keel.log");
        let file = open_append(&path)?;
        let size = file.metadata()?.len();
        let secrets = std::env::vars_os()
            .filter_map(|(name, value)| {
                let (name, value) = (name.into_string().ok()?, value.into_string().ok()?);
                (is_secret_name(&name) && value.trim().len() >= MIN_SECRET_LEN).then_some(value)
            })
            .collect();
        Ok(Self {
            path,
            file,
            size,
            max_bytes: MAX_BYTES,
            secrets,
        })
    }

    /// `keel.log` → `keel.log.1` → … → `keel.log.{KEEP}` (dropped), and a new `keel.log`.
    fn rotate(&mut self) -> io::Result<()> {
        let numbered = |n: u32| {
            let mut name = self.path.clone().into_os_string();
            name.push(format!(".{n}"));
            PathBuf::from(name)
        };
        for n in (1..KEEP).rev() {
            match std::fs::rename(numbered(n), numbered(n + 1)) {
                Err(err) if err.kind() != io::ErrorKind::NotFound => return Err(err),
                _ => {}
            }
        }
        std::fs::rename(&self.path, numbered(1))?;
        self.file = open_append(&self.path)?;
        self.size = 0;
        Ok(())
    }

    /// `text` with every secret replaced by [`REDACTED`].
    fn scrub(&self, text: &str) -> String {
        let shared = SECRETS.read().unwrap_or_else(PoisonError::into_inner);
        let mut text = text.to_owned();
        for secret in self.secrets.iter().chain(shared.iter()) {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), REDACTED);
            }
        }
        text
    }
}

impl Write for LogFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let line = self.scrub(&String::from_utf8_lossy(buf));
        if self.size > 0 && self.size + line.len() as u64 > self.max_bytes {
            // A file that cannot be rotated is written on: a log too long beats a lost one.
            let _ = self.rotate();
        }
        self.file.write_all(line.as_bytes())?;
        self.size += line.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// `path` opened for appending, created 0600; an existing file is made 0600 too.
fn open_append(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_like_names_are_secret() {
        for name in [
            "ANTHROPIC_API_KEY",
            "GITHUB_TOKEN",
            "aws_secret",
            "DB_PASSWORD",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["HOME", "PATH", "KEEL_LOG", "KEYBOARD"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn the_file_rotates_past_its_limit_and_keeps_three() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let logs = dir.path().join("logs");
        let mut log = LogFile::open(&logs)?;
        log.secrets = vec!["sk-very-secret".into()];
        log.max_bytes = 1000;
        let mode = |path: &Path| -> io::Result<u32> {
            Ok(std::fs::metadata(path)?.permissions().mode() & 0o777)
        };
        assert_eq!(mode(&logs)?, 0o700);
        assert_eq!(mode(&logs.join("keel.log"))?, 0o600);
        let line = "x".repeat(99) + "\n";
        for _ in 0..45 {
            log.write_all(line.as_bytes())?;
        }
        log.write_all(b"key sk-very-secret here\n")?;
        log.flush()?;
        let size = |name: &str| std::fs::metadata(logs.join(name)).map(|m| m.len());
        for name in ["keel.log.1", "keel.log.2", "keel.log.3"] {
            assert_eq!(size(name)?, 1000, "{name}");
        }
        assert!(size("keel.log.4").is_err());
        let current = std::fs::read_to_string(logs.join("keel.log"))?;
        assert!(current.ends_with("key [redacted] here\n"), "{current:.40}");
        assert_eq!(mode(&logs.join("keel.log"))?, 0o600);
        Ok(())
    }
}
