//! Where things are: keel's home and its stores, the working directory, directories a flag
//! names.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel::engine::{JsonlSessionStore, SessionStore};
use keel::tasks::{SqliteTaskStore, TaskStore};

use super::{Overrides, SessionChoice};
use crate::Error;

/// keel's home (`$KEEL_HOME`, else `~/.keel`): [`keel::home_dir`].
pub fn keel_home() -> Result<PathBuf, Error> {
    keel::home_dir().map_err(|err| Error::Invalid(err.to_string()))
}

/// The session store under `$KEEL_HOME/sessions`.
pub fn session_store(keel_home: &Path) -> Arc<JsonlSessionStore> {
    Arc::new(JsonlSessionStore::new(keel::Home(keel_home).sessions()))
}

/// The task store under `$KEEL_HOME`.
pub(crate) fn open_task_store(keel_home: &Path) -> Result<Arc<dyn TaskStore>, Error> {
    let store = SqliteTaskStore::open(&keel::Home(keel_home).tasks_db())
        .map_err(|err| Error::Failed(err.to_string()))?;
    Ok(Arc::new(store))
}

/// `dir` resolved, if it is an existing directory; else a usage error naming it after
/// `what` (a flag, or nothing).
pub fn existing_dir(dir: &Path, what: &str) -> Result<PathBuf, Error> {
    std::fs::canonicalize(dir)
        .ok()
        .filter(|full| full.is_dir())
        .ok_or_else(|| {
            Error::Invalid(format!(
                "{what}{}: not an existing directory; name one that exists",
                dir.display()
            ))
        })
}

/// The directory `-C` names, else the current one.
pub fn given_dir(overrides: &Overrides) -> Result<PathBuf, Error> {
    match &overrides.cwd {
        Some(dir) => Ok(dir.clone()),
        None => std::env::current_dir()
            .map_err(|err| Error::Invalid(format!("the current directory: {err}"))),
    }
}

/// The working directory: the resumed session's, else `-C`, else the current one.
pub(super) fn working_dir(
    overrides: &Overrides,
    session: &SessionChoice,
    store: &JsonlSessionStore,
) -> Result<PathBuf, Error> {
    let given = given_dir(overrides)?;
    let dir = match session {
        SessionChoice::Resume(id) => {
            let loaded = store
                .load(id)
                .map_err(|err| Error::Invalid(format!("cannot resume: {err}")))?;
            loaded.meta.cwd
        }
        _ => given,
    };
    let canonical = std::fs::canonicalize(&dir).map_err(|err| {
        Error::Invalid(format!(
            "working directory {}: {err}; pass an existing directory with -C",
            dir.display()
        ))
    })?;
    if !canonical.is_dir() {
        return Err(Error::Invalid(format!(
            "working directory {} is not a directory",
            dir.display()
        )));
    }
    Ok(canonical)
}

/// Makes sure keel may keep its config, sessions and snapshots in `home`: it exists (made if
/// missing) and a file can be created in it. Anything else is a configuration error that names
/// the directory, not a failed run.
pub(crate) fn check_writable_home(home: &Path) -> Result<(), Error> {
    let fail = |err: std::io::Error| {
        Error::Invalid(format!(
            "keel's home {} is not a writable directory ({err}); set KEEL_HOME to a directory \
             keel may write, or fix its permissions",
            home.display()
        ))
    };
    std::fs::create_dir_all(home).map_err(fail)?;
    let probe = home.join(format!(".keel-write-check-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe)
        .map_err(fail)?;
    std::fs::remove_file(&probe).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unwritable_home_is_a_configuration_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        let err = check_writable_home(&file).expect_err("a file is not a home");
        assert!(matches!(err, Error::Invalid(_)), "{err:?}");
        assert!(err.to_string().contains(&*file.to_string_lossy()), "{err}");
        let proc_home = Path::new("/proc/keel-home");
        let err = check_writable_home(proc_home).expect_err("/proc is not writable");
        assert!(err.to_string().contains("/proc/keel-home"), "{err}");
        let fresh = dir.path().join("new/home");
        check_writable_home(&fresh).unwrap();
        assert!(fresh.is_dir());
        assert_eq!(
            std::fs::read_dir(&fresh).unwrap().count(),
            0,
            "the probe is removed"
        );
    }
}
