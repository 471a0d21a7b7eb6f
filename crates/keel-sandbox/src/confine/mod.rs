//! Kernel confinement of commands: [`CommandSandbox`].
//!
//! Everything is prepared in the parent, before the command is spawned: Landlock support and
//! namespace support are detected once per process, the paths opened, the Landlock rules
//! added, the seccomp program compiled, the mount list written out. The child only makes raw
//! system calls on that memory between `fork` and `exec` (see [`child`]).
//!
//! What a confined command gets is documented on [`CommandSandbox`].
//!
//! Whatever the kernel cannot enforce is reported, never hidden: a kernel without Landlock
//! makes confined modes fail, or run unconfined with a note when the policy allows it; an
//! older ABI that cannot block TCP or truncation leaves a note in every result.
//!
//! Built without the `confine` feature, `landlock.rs`, `seccomp.rs` and `namespaces.rs` are
//! left out: every run is decided as [`Support::NotBuilt`], which confined modes treat like a
//! kernel without Landlock (refuse, or run unconfined with a note naming the missing
//! feature), and the child only calls `setsid`.

mod child;
#[cfg(feature = "confine")]
mod landlock;
#[cfg(feature = "confine")]
mod namespaces;
#[cfg(feature = "confine")]
mod seccomp;
mod tempdir;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use self::child::ChildPlan;
#[cfg(feature = "confine")]
use self::landlock::Writable;
use crate::error::SandboxError;
use crate::policy::{SandboxMode, SandboxPolicy};
use crate::protect::{Protected, ProtectedSnapshot};

/// The environment variable that, set to `1` in keel's environment, turns namespaces off (read once):
/// protected paths are then guarded by detect-and-restore alone. (Built without the `confine`
/// feature there are no namespaces, and it has no effect.)
pub const NO_NAMESPACES_VAR: &str = "KEEL_SANDBOX_NO_NAMESPACES";

/// Shared memory, writable like the temp dir in workspace-write mode.
#[cfg(feature = "confine")]
const SHM: &str = "/dev/shm";

/// Cargo's package-cache lock files, below `$CARGO_HOME`: all a `cargo build --offline` of
/// already-fetched dependencies needs to write there. (Cargo also opens its last-use
/// database, `.global-cache`, for writing, and carries on without recording when it cannot:
/// it stays read-only, because what it holds steers what cargo's garbage collection deletes.)
#[cfg(feature = "confine")]
const CARGO_LOCK_FILES: [&str; 2] = [".package-cache", ".package-cache-mutate"];

/// The Landlock ABI of the running kernel, or `None` without Landlock. Detected once.
#[cfg(feature = "confine")]
use self::landlock::landlock_abi;

/// What kernel confinement this build and this kernel offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Support {
    /// keel was built without the `confine` feature: no Landlock, no seccomp, no namespaces.
    /// (A build with it only makes this in tests, which check its messages in every build.)
    #[cfg_attr(feature = "confine", allow(dead_code))]
    NotBuilt,
    /// Built with it, but the kernel has no Landlock.
    #[cfg(feature = "confine")]
    NoLandlock,
    /// Landlock at this ABI.
    #[cfg(feature = "confine")]
    Landlock(u8),
}

impl Support {
    /// What this process has: detected once.
    fn detect() -> Self {
        #[cfg(feature = "confine")]
        {
            landlock_abi().map_or(Self::NoLandlock, Self::Landlock)
        }
        #[cfg(not(feature = "confine"))]
        {
            Self::NotBuilt
        }
    }
}

/// A command's confinement, prepared in the parent before the spawn: apply it to a
/// [`tokio::process::Command`] (or a `std` one) and spawn. The same rules as `run_command`'s,
/// for hosts that start other programs under a policy, such as a task runner.
///
/// What a confined command ([`SandboxMode::WorkspaceWrite`] and [`SandboxMode::ReadOnly`])
/// gets:
///
/// - **Files** (Landlock): read and execute everywhere; in workspace-write, write inside the
///   workspace root, the session temp dir (its `TMPDIR`), `/dev/shm` and the policy's
///   `writable_roots`, plus read/write (never replace) of cargo's package-cache lock files
///   (`$CARGO_HOME/.package-cache`, `.package-cache-mutate`), so offline builds work.
///   Read-only writes nowhere. Both may use `/dev/null`, `/dev/zero`, `/dev/full`,
///   `/dev/random`, `/dev/urandom` and `/dev/tty`. Nobody may make a device node. Landlock
///   ABI 6 and later also keep the command from signalling processes outside its sandbox
///   (such as keel).
/// - **Network off** (unless the policy's `network`): TCP connect and bind are denied
///   (Landlock ABI 4), so are connections to abstract Unix sockets outside the sandbox (ABI
///   6); a seccomp filter makes `socket()` of any family but `AF_UNIX` and `AF_NETLINK` and
///   `io_uring_setup` fail with `EPERM` (calls of another architecture kill the process); and
///   where namespaces work the command runs in a network namespace whose only interface is
///   a loopback that is down (one per keel process, joined by each command).
/// - **Protected paths** (where unprivileged user namespaces work): a user and mount
///   namespace in which every existing protected path is a read-only bind mount and the
///   session's socket directories (tmux, X11, the runtime dir, Docker, SSH agents) are
///   hidden. Elsewhere, and in every mode, [`ProtectedSnapshot`] detects and restores.
/// - **Environment**: no credentials, no way back into the session ([`crate::scrub_env`]),
///   `TMPDIR`, `TMP` and `TEMP` set to the session temp dir.
/// - **Its own session**: the child calls `setsid` (its own process group, no controlling
///   terminal), so its group can be killed whole.
///
/// [`SandboxMode::FullAccess`] is not confined (network on); its commands still get the environment rules and detect-and-restore.
///
/// Built without the `confine` feature (no Landlock, no seccomp), the confined modes behave
/// as on a kernel without Landlock: [`prepare`](Self::prepare) fails with
/// [`SandboxError::Unenforceable`] unless the policy's `allow_unconfined_fallback` is set,
/// in which case commands run unconfined and [`notes`](Self::notes) says so.
///
/// ```no_run
/// use keel_sandbox::{CommandSandbox, SandboxPolicy};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let workdir = std::path::Path::new("/work/project");
/// let temp = std::path::Path::new("/tmp/keel/s1/tmp");
/// let sandbox = CommandSandbox::prepare(workdir, &SandboxPolicy::default(), temp)?;
/// let snapshot = sandbox.snapshot_protected();
/// let mut command = tokio::process::Command::new("make");
/// command.current_dir(workdir);
/// sandbox.apply(&mut command);
/// let status = command.status().await?;
/// let report = snapshot.restore();
/// # let _ = (status, report);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct CommandSandbox {
    plan: Arc<ChildPlan>,
    hidden_env: Vec<String>,
    env: Vec<(String, String)>,
    temp_dir: PathBuf,
    confined: bool,
    abi: Option<u8>,
    network_blocked: bool,
    namespaces: bool,
    notes: Vec<String>,
    protected: Protected,
}

impl CommandSandbox {
    /// Prepares the confinement of commands run in `workdir` under `policy`, with `temp_dir`
    /// as their session temp dir (created `0700` if missing, never through a symlink; a host
    /// passes `ctx.scratch_dir().join("tmp")` or its own session's equivalent).
    ///
    /// Fails with [`SandboxError::Unenforceable`] when the kernel (or a build without the
    /// `confine` feature) cannot enforce the mode and the policy does not allow running
    /// unconfined, and [`SandboxError::Setup`] when the
    /// sandbox cannot be built (a missing workdir, an unsafe temp dir).
    pub fn prepare(
        workdir: &Path,
        policy: &SandboxPolicy,
        temp_dir: &Path,
    ) -> Result<Self, SandboxError> {
        let setup = |message: String| SandboxError::Setup { message };
        let (temp_path, temp_fd) = tempdir::prepare(temp_dir).map_err(setup)?;
        // Only a Landlock rule would use the descriptor.
        #[cfg(not(feature = "confine"))]
        drop(temp_fd);
        let protected = Protected::discover(workdir, &policy.protected_paths);
        let mut sandbox = Self {
            plan: Arc::new(ChildPlan::default()),
            hidden_env: policy.hidden_env.clone(),
            env: policy.env.clone(),
            temp_dir: temp_path,
            confined: false,
            abi: None,
            network_blocked: false,
            namespaces: false,
            notes: Vec::new(),
            protected,
        };
        match decide(policy, Support::detect()) {
            Decision::Unconfined { note } => {
                if let Some(note) = &note {
                    warn_unconfined(note);
                }
                sandbox.notes.extend(note);
                Ok(sandbox)
            }
            Decision::Refuse(message) => {
                warn_unconfined(&message);
                Err(SandboxError::Unenforceable { message })
            }
            #[cfg(feature = "confine")]
            Decision::Confine {
                abi,
                notes,
                block_network,
            } => {
                sandbox.confine(workdir, policy, temp_fd, abi, block_network)?;
                sandbox.notes = notes;
                Ok(sandbox)
            }
        }
    }

    /// Builds the confinement for Landlock ABI `abi`: the ruleset, the seccomp filter, the
    /// namespaces where they work.
    #[cfg(feature = "confine")]
    fn confine(
        &mut self,
        workdir: &Path,
        policy: &SandboxPolicy,
        temp_fd: std::os::fd::OwnedFd,
        abi: u8,
        block_network: bool,
    ) -> Result<(), SandboxError> {
        let setup = |message: String| SandboxError::Setup { message };
        let writable = writable(workdir, policy, temp_fd);
        let ruleset = landlock::build_ruleset(landlock::abi_for(abi), &writable, block_network)
            .map_err(|err| setup(format!("its Landlock rules could not be built: {err}")))?;
        let seccomp = if policy.network {
            None
        } else {
            Some(
                seccomp::network_filter()
                    .map_err(|err| setup(format!("its seccomp filter could not be built: {err}")))?
                    .to_vec(),
            )
        };
        let support = namespaces::support();
        let namespace_plan = if support == namespaces::Support::None {
            None
        } else {
            let keep = [workdir, self.temp_dir.as_path()];
            let mut mounts = Vec::new();
            for path in self.protected.existing() {
                mounts.extend(namespaces::read_only_bind(&path).into_iter().flatten());
            }
            for path in namespaces::session_sockets(&keep) {
                mounts.extend(namespaces::hide(&path));
            }
            namespaces::plan(support, !policy.network, mounts)
        };
        self.namespaces = namespace_plan.is_some();
        self.plan = Arc::new(ChildPlan {
            namespaces: namespace_plan,
            last_capability: child::last_capability(),
            no_new_privs: true,
            seccomp,
            landlock: Some(ruleset),
        });
        self.confined = true;
        self.abi = Some(abi);
        self.network_blocked = !policy.network;
        Ok(())
    }

    /// Makes `command` run confined: a new session (its own process group, no controlling
    /// terminal; a command already set to be a group leader keeps its session), the
    /// namespaces, seccomp filter and Landlock rules, and the environment with the policy's
    /// [`env`](SandboxPolicy::env) added, then scrubbed, and `TMPDIR`, `TMP` and `TEMP` set to
    /// the session temp dir. The command keeps what it
    /// needs of `self` until it is dropped.
    pub fn apply(&self, command: &mut tokio::process::Command) {
        self.apply_std(command.as_std_mut());
    }

    /// [`apply`](Self::apply) for a `std` command.
    pub fn apply_std(&self, command: &mut std::process::Command) {
        command.envs(self.env.iter().map(|(name, value)| (name, value)));
        crate::env::scrub_std_env(command, &self.hidden_env);
        for name in ["TMPDIR", "TMP", "TEMP"] {
            command.env(name, &self.temp_dir);
        }
        child::install(command, Arc::clone(&self.plan));
    }

    /// Whether the kernel enforces the policy (false in full access, or when running
    /// unconfined was allowed on a kernel without Landlock or in a build without the
    /// `confine` feature).
    pub fn confined(&self) -> bool {
        self.confined
    }

    /// The Landlock ABI in use, if confined.
    pub fn landlock_abi(&self) -> Option<u8> {
        self.abi
    }

    /// Whether the network is taken away (seccomp, and Landlock TCP rules where the ABI has
    /// them).
    pub fn network_blocked(&self) -> bool {
        self.network_blocked
    }

    /// Whether commands run in their own user and mount namespace, with protected paths
    /// mounted read-only (else only detect-and-restore guards them).
    pub fn namespaces(&self) -> bool {
        self.namespaces
    }

    /// What the sandbox cannot enforce here, for the model and the person.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The session temp dir commands get as `TMPDIR` (resolved).
    pub fn temp_dir(&self) -> &Path {
        &self.temp_dir
    }

    /// The protected paths as they are now, to [`restore`](ProtectedSnapshot::restore) after
    /// the command and everything it started has ended.
    pub fn snapshot_protected(&self) -> ProtectedSnapshot {
        self.protected.snapshot()
    }
}

/// What a confined command may write under `policy`.
#[cfg(feature = "confine")]
fn writable(workdir: &Path, policy: &SandboxPolicy, temp: std::os::fd::OwnedFd) -> Writable {
    match policy.mode {
        SandboxMode::WorkspaceWrite => {
            let mut dirs = vec![workdir.to_path_buf()];
            if Path::new(SHM).is_dir() {
                dirs.push(PathBuf::from(SHM));
            }
            dirs.extend(policy.writable_roots.iter().cloned());
            let files: Vec<PathBuf> = cargo_home()
                .map(|home| CARGO_LOCK_FILES.iter().map(|f| home.join(f)).collect())
                .unwrap_or_default();
            for file in &files {
                // Cargo would create a missing lock file, which the command cannot: the
                // first build run by keel creates it, empty, as cargo does.
                if !file.exists() {
                    let _ = std::fs::OpenOptions::new()
                        .append(true)
                        .create(true)
                        .open(file);
                }
            }
            Writable {
                dirs,
                first_required: true,
                open_dirs: vec![temp],
                files,
            }
        }
        SandboxMode::ReadOnly | SandboxMode::FullAccess => Writable::default(),
    }
}

/// Cargo's home: `$CARGO_HOME`, else `~/.cargo`; `None` when it does not exist.
#[cfg(feature = "confine")]
fn cargo_home() -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::home_dir().map(|home| home.join(".cargo")))?;
    home.is_dir().then_some(home)
}

/// What to do for `policy` with `support`.
#[derive(Debug, PartialEq, Eq)]
enum Decision {
    /// Run unconfined: full access, or no confinement available and the fallback allowed
    /// (with a note).
    Unconfined { note: Option<String> },
    /// Refuse to run, with this message.
    Refuse(String),
    /// Confine with the ruleset for Landlock ABI `abi`, noting what it cannot enforce.
    #[cfg(feature = "confine")]
    Confine {
        abi: u8,
        notes: Vec<String>,
        block_network: bool,
    },
}

/// Why a build without the `confine` feature cannot confine, as the notes say it.
const NOT_BUILT: &str =
    "keel was built without kernel confinement (the `confine` feature of keel-sandbox / keel)";

fn decide(policy: &SandboxPolicy, support: Support) -> Decision {
    let mode = match policy.mode {
        SandboxMode::FullAccess => return Decision::Unconfined { note: None },
        SandboxMode::WorkspaceWrite => "workspace-write",
        SandboxMode::ReadOnly => "read-only",
    };
    match support {
        Support::NotBuilt => {
            if policy.allow_unconfined_fallback {
                return Decision::Unconfined {
                    note: Some(format!(
                        "{NOT_BUILT}, so the {mode} sandbox could not be enforced: the command \
                         ran WITHOUT confinement (network and files open)"
                    )),
                };
            }
            Decision::Refuse(format!(
                "the command was not run: the {mode} sandbox needs kernel confinement, and \
                 {NOT_BUILT}. Tell the user; they can use a keel built with that feature, or \
                 allow unconfined commands in the sandbox policy"
            ))
        }
        #[cfg(feature = "confine")]
        Support::NoLandlock => {
            if policy.allow_unconfined_fallback {
                return Decision::Unconfined {
                    note: Some(format!(
                        "this kernel does not support Landlock, so the {mode} sandbox could not \
                         be enforced: the command ran WITHOUT confinement (network and files \
                         open)"
                    )),
                };
            }
            Decision::Refuse(format!(
                "the command was not run: the {mode} sandbox needs Landlock, which this kernel \
                 does not support (Linux 5.13 or later with Landlock enabled). Tell the user; \
                 they can enable Landlock, or allow unconfined commands in the sandbox policy"
            ))
        }
        #[cfg(feature = "confine")]
        Support::Landlock(abi) => confine_notes(policy, abi),
    }
}

/// The confinement for Landlock ABI `abi`, with what it cannot enforce.
#[cfg(feature = "confine")]
fn confine_notes(policy: &SandboxPolicy, abi: u8) -> Decision {
    let mut notes = Vec::new();
    let block_network = !policy.network && abi >= 4;
    if !policy.network && abi < 4 {
        notes.push(format!(
            "TCP is blocked only by the seccomp filter: this kernel's Landlock (ABI {abi}) \
             cannot restrict TCP (that needs ABI 4, Linux 6.7)"
        ));
    }
    if abi < 3 {
        notes.push(format!(
            "truncating files outside the writable directories is not blocked (Landlock ABI \
             {abi} < 3)"
        ));
    }
    if abi < 2 && policy.mode == SandboxMode::WorkspaceWrite {
        notes.push(
            "moving or linking files between directories fails under Landlock ABI 1".to_owned(),
        );
    }
    Decision::Confine {
        abi,
        notes,
        block_network,
    }
}

/// Warns once per process that commands run unconfined.
fn warn_unconfined(note: &str) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!("commands cannot be confined: {note}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(mode: SandboxMode, network: bool, fallback: bool) -> SandboxPolicy {
        SandboxPolicy {
            network,
            allow_unconfined_fallback: fallback,
            ..SandboxPolicy::with_mode(mode)
        }
    }

    /// Every kind of support this build knows.
    fn supports() -> Vec<Support> {
        #[cfg(feature = "confine")]
        return vec![
            Support::NotBuilt,
            Support::NoLandlock,
            Support::Landlock(1),
            Support::Landlock(7),
        ];
        #[cfg(not(feature = "confine"))]
        return vec![Support::NotBuilt];
    }

    #[test]
    fn full_access_is_never_confined() {
        for support in supports() {
            assert_eq!(
                decide(&policy(SandboxMode::FullAccess, false, false), support),
                Decision::Unconfined { note: None }
            );
        }
    }

    #[test]
    fn not_built_confined_modes_refuse_naming_the_feature() {
        for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
            for network in [false, true] {
                let Decision::Refuse(message) =
                    decide(&policy(mode, network, false), Support::NotBuilt)
                else {
                    panic!("expected a refusal for {mode:?}");
                };
                assert!(message.starts_with("the command was not run"), "{message}");
                assert!(message.contains(NOT_BUILT), "{message}");
                assert!(!message.contains("this kernel"), "{message}");
            }
        }
        let Decision::Refuse(message) = decide(
            &policy(SandboxMode::WorkspaceWrite, false, false),
            Support::NotBuilt,
        ) else {
            panic!("expected a refusal");
        };
        assert_eq!(
            message,
            "the command was not run: the workspace-write sandbox needs kernel confinement, \
             and keel was built without kernel confinement (the `confine` feature of \
             keel-sandbox / keel). Tell the user; they can use a keel built with that \
             feature, or allow unconfined commands in the sandbox policy"
        );
    }

    #[test]
    fn not_built_with_the_fallback_runs_unconfined_with_a_note() {
        for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
            let Decision::Unconfined { note: Some(note) } =
                decide(&policy(mode, false, true), Support::NotBuilt)
            else {
                panic!("expected an unconfined run with a note for {mode:?}");
            };
            assert!(note.contains(NOT_BUILT), "{note}");
            assert!(note.contains("WITHOUT confinement"), "{note}");
        }
        assert_eq!(
            decide(
                &policy(SandboxMode::ReadOnly, true, true),
                Support::NotBuilt
            ),
            Decision::Unconfined {
                note: Some(
                    "keel was built without kernel confinement (the `confine` feature of \
                     keel-sandbox / keel), so the read-only sandbox could not be enforced: the \
                     command ran WITHOUT confinement (network and files open)"
                        .to_owned()
                )
            }
        );
    }

    /// The detected support matches the build: a build without `confine` never confines.
    #[test]
    fn detected_support_matches_the_build() {
        let support = Support::detect();
        if cfg!(feature = "confine") {
            assert_ne!(support, Support::NotBuilt);
        } else {
            assert_eq!(support, Support::NotBuilt);
        }
    }

    #[cfg(feature = "confine")]
    #[test]
    fn without_landlock_confined_modes_refuse_or_fall_back_with_a_note() {
        let Decision::Refuse(message) = decide(
            &policy(SandboxMode::WorkspaceWrite, true, false),
            Support::NoLandlock,
        ) else {
            panic!("expected a refusal");
        };
        assert!(
            message.contains("workspace-write sandbox needs Landlock"),
            "{message}"
        );
        let Decision::Unconfined { note: Some(note) } = decide(
            &policy(SandboxMode::ReadOnly, true, true),
            Support::NoLandlock,
        ) else {
            panic!("expected an unconfined run with a note");
        };
        assert!(note.contains("WITHOUT confinement"), "{note}");
        assert!(note.contains("read-only"), "{note}");
        assert!(
            note.contains("this kernel does not support Landlock"),
            "{note}"
        );
    }

    #[cfg(feature = "confine")]
    #[test]
    fn partial_enforcement_is_reported() {
        let Decision::Confine {
            abi,
            notes,
            block_network,
        } = decide(
            &policy(SandboxMode::WorkspaceWrite, false, false),
            Support::Landlock(3),
        )
        else {
            panic!("expected confinement");
        };
        assert_eq!(abi, 3);
        assert!(!block_network);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("cannot restrict TCP"), "{notes:?}");

        let Decision::Confine { notes, .. } = decide(
            &policy(SandboxMode::WorkspaceWrite, true, false),
            Support::Landlock(1),
        ) else {
            panic!("expected confinement");
        };
        assert_eq!(notes.len(), 2, "{notes:?}");

        assert_eq!(
            decide(
                &policy(SandboxMode::ReadOnly, false, false),
                Support::Landlock(7)
            ),
            Decision::Confine {
                abi: 7,
                notes: Vec::new(),
                block_network: true
            }
        );
    }
}
