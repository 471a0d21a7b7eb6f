//! Kernel confinement of commands with Landlock.
//!
//! The ruleset is built in the parent, before the command is spawned: Landlock support is
//! detected once, the paths are opened, the rules added. The child only calls
//! `prctl(PR_SET_NO_NEW_PRIVS)` and `landlock_restrict_self` on the prepared descriptor
//! between `fork` and `exec`: two system calls, no allocation, no locks.
//!
//! The rules, for [`SandboxMode::WorkspaceWrite`]: read and execute everywhere (`/`); full
//! access inside the workspace root, the system temp dir and `/dev/shm`; reading and writing
//! `/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random`, `/dev/urandom` and `/dev/tty`.
//! [`SandboxMode::ReadOnly`] is the same without the root, the temp dir and `/dev/shm`.
//! [`SandboxMode::FullAccess`] is not confined. With `network: false`, TCP `connect` and
//! `bind` are denied (Landlock ABI 4 and later), and so are connections to abstract Unix
//! sockets made outside the sandbox (ABI 6). Landlock ABI 6 and later also keep the command
//! from signalling processes outside its sandbox (such as the agent itself).
//!
//! Whatever the kernel cannot enforce is reported, never hidden: a kernel without Landlock
//! makes confined modes fail, or run unconfined with a note when the policy allows it; an
//! older ABI that cannot block TCP or truncation leaves a note in every result.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use keel_tool::ToolError;
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    RestrictSelfAttr, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};

use crate::policy::{SandboxMode, SandboxPolicy};

/// Devices any confined command may read and write.
const DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// Shared memory, writable like the temp dir in workspace-write mode.
const SHM: &str = "/dev/shm";

/// The ABIs this module knows, newest first, with their numbers.
const ABIS: [(ABI, u8); 9] = [
    (ABI::V9, 9),
    (ABI::V8, 8),
    (ABI::V7, 7),
    (ABI::V6, 6),
    (ABI::V5, 5),
    (ABI::V4, 4),
    (ABI::V3, 3),
    (ABI::V2, 2),
    (ABI::V1, 1),
];

/// The Landlock ABI of the running kernel (as far as the `landlock` crate knows ABIs), or
/// `None` without Landlock. Detected once.
pub(crate) fn landlock_abi() -> Option<u8> {
    static ABI_LEVEL: OnceLock<Option<u8>> = OnceLock::new();
    *ABI_LEVEL.get_or_init(|| {
        let found = ABIS
            .iter()
            .find(|(abi, _)| probe(*abi))
            .map(|(_, level)| *level);
        tracing::debug!(landlock_abi = ?found, "detected Landlock support");
        found
    })
}

/// Whether the kernel supports every feature of `abi`: creating a ruleset that requires them
/// all succeeds.
fn probe(abi: ABI) -> bool {
    let build = || -> Result<RulesetCreated, landlock::RulesetError> {
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))?;
        if abi >= ABI::V4 {
            ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
        }
        if abi >= ABI::V6 {
            ruleset = ruleset.scope(Scope::from_all(abi))?;
        }
        let mut created = ruleset.create()?;
        if abi >= ABI::V7 {
            created = created.log_same_exec(false)?;
        }
        if abi >= ABI::V8 {
            created = created.all_threads(true)?;
        }
        Ok(created)
    };
    build().is_ok()
}

/// The `ABI` value for a level; levels above what this module uses map to the newest it
/// uses. Rights beyond ABI 8 (`ResolveUnix`, which would also block connecting to Unix
/// sockets such as the name service's) are deliberately not handled.
fn abi_for(level: u8) -> ABI {
    let level = level.min(8);
    ABIS.iter()
        .find(|(_, l)| *l == level)
        .map_or(ABI::V1, |(abi, _)| *abi)
}

/// How a command will be confined, prepared before it is spawned.
#[derive(Debug)]
pub(crate) struct Confinement {
    /// The ruleset to apply in the child; `None` runs it unconfined.
    ruleset: Option<OwnedFd>,
    /// The Landlock ABI in use, if confined.
    pub(crate) abi: Option<u8>,
    /// Whether TCP connect and bind are blocked.
    pub(crate) network_blocked: bool,
    /// What the sandbox could not enforce, for the model and the user.
    pub(crate) notes: Vec<String>,
}

impl Confinement {
    /// Whether the kernel enforces the policy's file rules.
    pub(crate) fn confined(&self) -> bool {
        self.ruleset.is_some()
    }

    /// Makes `command`'s child start a new session (so it has its own process group and no
    /// controlling terminal: a prompt for a password fails instead of stealing the user's
    /// terminal) and, when confined, restrict itself with the ruleset. `self` must outlive
    /// the spawn: the child uses the ruleset's descriptor.
    pub(crate) fn apply(&self, command: &mut tokio::process::Command) {
        prepare_child(command, self.ruleset.as_ref());
    }
}

/// What to do for `policy` on a kernel with Landlock ABI `abi` (`None`: no Landlock).
#[derive(Debug, PartialEq, Eq)]
enum Decision {
    /// Run unconfined: full access, or no Landlock and the fallback allowed (with a note).
    Unconfined { note: Option<String> },
    /// Refuse to run, with this message.
    Refuse(String),
    /// Confine with the ruleset for this ABI, noting what it cannot enforce.
    Confine {
        notes: Vec<String>,
        block_network: bool,
    },
}

fn decide(policy: &SandboxPolicy, abi: Option<u8>) -> Decision {
    let mode = match policy.mode {
        SandboxMode::FullAccess => return Decision::Unconfined { note: None },
        SandboxMode::WorkspaceWrite => "workspace-write",
        SandboxMode::ReadOnly => "read-only",
    };
    let Some(abi) = abi else {
        if policy.allow_unconfined_fallback {
            return Decision::Unconfined {
                note: Some(format!(
                    "this kernel does not support Landlock, so the {mode} sandbox could not be \
                     enforced: the command ran WITHOUT confinement"
                )),
            };
        }
        return Decision::Refuse(format!(
            "the command was not run: the {mode} sandbox needs Landlock, which this kernel does \
             not support (Linux 5.13 or later with Landlock enabled). Tell the user; they can \
             enable Landlock, or allow unconfined commands in the sandbox policy"
        ));
    };
    let mut notes = Vec::new();
    let block_network = !policy.network && abi >= 4;
    if !policy.network && abi < 4 {
        notes.push(format!(
            "network access is NOT blocked: this kernel's Landlock (ABI {abi}) cannot restrict \
             TCP (that needs ABI 4, Linux 6.7)"
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
        notes,
        block_network,
    }
}

/// Warns once per process that commands run unconfined.
fn warn_unconfined(note: &str) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!("Landlock is unavailable: {note}");
    }
}

/// Prepares the confinement of a command run in `root` under `policy`.
pub(crate) fn prepare(root: &Path, policy: &SandboxPolicy) -> Result<Confinement, ToolError> {
    let abi = landlock_abi();
    match decide(policy, abi) {
        Decision::Unconfined { note } => {
            if let Some(note) = &note {
                warn_unconfined(note);
            }
            Ok(Confinement {
                ruleset: None,
                abi: None,
                network_blocked: false,
                notes: note.into_iter().collect(),
            })
        }
        Decision::Refuse(message) => {
            warn_unconfined(&message);
            Err(ToolError::Denied(message))
        }
        Decision::Confine {
            notes,
            block_network,
        } => {
            let level = abi.unwrap_or(1);
            let ruleset =
                build_ruleset(abi_for(level), root, policy, block_network).map_err(|err| {
                    ToolError::failed(format!(
                        "the command was not run: its sandbox could not be set up: {err}"
                    ))
                })?;
            Ok(Confinement {
                ruleset: Some(ruleset),
                abi: Some(level),
                network_blocked: block_network,
                notes,
            })
        }
    }
}

/// The directories a command may write under `policy`, besides the devices; the workspace
/// root first.
fn writable_dirs(root: &Path, policy: &SandboxPolicy) -> Vec<PathBuf> {
    match policy.mode {
        SandboxMode::WorkspaceWrite => {
            let mut dirs = vec![root.to_path_buf(), std::env::temp_dir()];
            if Path::new(SHM).is_dir() {
                dirs.push(PathBuf::from(SHM));
            }
            dirs.extend(policy.writable_roots.iter().cloned());
            dirs
        }
        SandboxMode::ReadOnly | SandboxMode::FullAccess => Vec::new(),
    }
}

/// Builds the ruleset, requiring every right it handles (no silent best effort: the ABI was
/// detected, so anything the kernel rejects is an error).
fn build_ruleset(
    abi: ABI,
    root: &Path,
    policy: &SandboxPolicy,
    block_network: bool,
) -> Result<OwnedFd, String> {
    let landlock_err = |err: landlock::RulesetError| err.to_string();
    let all: BitFlags<AccessFs> = AccessFs::from_all(abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all)
        .map_err(landlock_err)?;
    if block_network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(landlock_err)?;
    }
    if abi >= ABI::V6 {
        ruleset = ruleset.scope(Scope::Signal).map_err(landlock_err)?;
        if block_network {
            ruleset = ruleset
                .scope(Scope::AbstractUnixSocket)
                .map_err(landlock_err)?;
        }
    }
    let mut created = ruleset.create().map_err(landlock_err)?;

    let root_fd = PathFd::new("/").map_err(|err| err.to_string())?;
    created = created
        .add_rule(PathBeneath::new(root_fd, AccessFs::from_read(abi)))
        .map_err(landlock_err)?;
    for (i, dir) in writable_dirs(root, policy).into_iter().enumerate() {
        let fd = match PathFd::new(&dir) {
            Ok(fd) => fd,
            // The workspace root must exist; the others are optional.
            Err(err) if i == 0 => return Err(format!("{}: {err}", dir.display())),
            Err(_) => continue,
        };
        created = created
            .add_rule(PathBeneath::new(fd, all))
            .map_err(landlock_err)?;
    }
    for device in DEVICES {
        if let Ok(fd) = PathFd::new(device) {
            created = created
                .add_rule(PathBeneath::new(fd, AccessFs::from_file(abi)))
                .map_err(landlock_err)?;
        }
    }
    Option::<OwnedFd>::from(created)
        .ok_or_else(|| "the kernel returned no Landlock ruleset".to_owned())
}

/// Makes the child of `command` call `setsid()` and, given a ruleset,
/// `prctl(PR_SET_NO_NEW_PRIVS)` and `landlock_restrict_self(ruleset)` before it executes the
/// program. `ruleset` must stay open until the command has been spawned.
#[allow(unsafe_code)]
fn prepare_child(command: &mut tokio::process::Command, ruleset: Option<&OwnedFd>) {
    let ruleset = ruleset.map(|fd| libc::c_long::from(fd.as_raw_fd()));
    let hook = move || -> io::Result<()> {
        // SAFETY: setsid takes no arguments and touches no memory of ours.
        if unsafe { libc::setsid() } == -1 {
            return Err(io::Error::last_os_error());
        }
        let Some(fd) = ruleset else {
            return Ok(());
        };
        let zero = libc::c_ulong::from(0u8);
        // SAFETY: prctl with PR_SET_NO_NEW_PRIVS takes integer arguments only and touches no
        // memory of ours.
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
            return Err(io::Error::last_os_error());
        }
        // SAFETY: landlock_restrict_self takes a descriptor number and flags; `fd` is the
        // ruleset, inherited from the parent, which keeps it open until the spawn returns.
        let restricted = unsafe {
            libc::syscall(
                libc::SYS_landlock_restrict_self,
                fd,
                libc::c_long::from(0u8),
            )
        };
        if restricted != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    };
    // SAFETY: the hook runs in the child between fork and exec, where only async-signal-safe
    // work is allowed. It makes at most three raw system calls (setsid, prctl,
    // landlock_restrict_self), each async-signal-safe, and on failure reads errno
    // (`io::Error::last_os_error` builds an integer-only error, without allocating). It
    // captures one integer, allocates nothing and takes no locks.
    unsafe {
        command.pre_exec(hook);
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

    #[test]
    fn full_access_is_never_confined() {
        for abi in [None, Some(1), Some(7)] {
            assert_eq!(
                decide(&policy(SandboxMode::FullAccess, false, false), abi),
                Decision::Unconfined { note: None }
            );
        }
    }

    #[test]
    fn without_landlock_confined_modes_refuse_or_fall_back_with_a_note() {
        let Decision::Refuse(message) =
            decide(&policy(SandboxMode::WorkspaceWrite, true, false), None)
        else {
            panic!("expected a refusal");
        };
        assert!(
            message.contains("workspace-write sandbox needs Landlock"),
            "{message}"
        );
        let Decision::Unconfined { note: Some(note) } =
            decide(&policy(SandboxMode::ReadOnly, true, true), None)
        else {
            panic!("expected an unconfined run with a note");
        };
        assert!(note.contains("WITHOUT confinement"), "{note}");
        assert!(note.contains("read-only"), "{note}");
    }

    #[test]
    fn partial_enforcement_is_reported() {
        let Decision::Confine {
            notes,
            block_network,
        } = decide(&policy(SandboxMode::WorkspaceWrite, false, false), Some(3))
        else {
            panic!("expected confinement");
        };
        assert!(!block_network);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("network access is NOT blocked"),
            "{notes:?}"
        );

        let Decision::Confine { notes, .. } =
            decide(&policy(SandboxMode::WorkspaceWrite, true, false), Some(1))
        else {
            panic!("expected confinement");
        };
        assert_eq!(notes.len(), 2, "{notes:?}");

        assert_eq!(
            decide(&policy(SandboxMode::ReadOnly, false, false), Some(7)),
            Decision::Confine {
                notes: Vec::new(),
                block_network: true
            }
        );
    }

    #[test]
    fn abi_levels_map_to_known_abis() {
        assert_eq!(abi_for(1), ABI::V1);
        assert_eq!(abi_for(7), ABI::V7);
        assert_eq!(abi_for(9), ABI::V8);
    }

    #[test]
    fn detection_agrees_with_the_kernel() {
        let abi = landlock_abi();
        assert_eq!(abi.is_some(), probe(ABI::V1));
        if let Some(level) = abi {
            // The ruleset for the detected ABI is one the kernel accepts.
            let dir = std::env::temp_dir();
            let built = build_ruleset(abi_for(level), &dir, &SandboxPolicy::default(), true);
            assert!(built.is_ok(), "{built:?}");
            // And the next ABI up is not supported (unless this is the newest known).
            if let Some((next, _)) = ABIS.iter().find(|(_, l)| *l == level + 1) {
                assert!(!probe(*next));
            }
        }
        let missing = build_ruleset(
            ABI::V1,
            Path::new("/nonexistent/keel"),
            &SandboxPolicy::default(),
            false,
        );
        if abi.is_some() {
            assert!(missing.is_err_and(|err| err.contains("/nonexistent/keel")));
        }
    }
}
