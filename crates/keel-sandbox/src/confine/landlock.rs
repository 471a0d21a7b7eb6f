//! The Landlock ruleset of a confined command: detected once, built in the parent.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::OnceLock;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    RestrictSelfAttr, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};

/// Devices any confined command may read and write.
pub(crate) const DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

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
pub(crate) fn abi_for(level: u8) -> ABI {
    let level = level.min(8);
    ABIS.iter()
        .find(|(_, l)| *l == level)
        .map_or(ABI::V1, |(abi, _)| *abi)
}

/// What a confined command may write besides reading everywhere.
#[derive(Debug, Default)]
pub(crate) struct Writable {
    /// Directories with every right but making devices; the first must exist (the
    /// workspace root in workspace-write), the rest are skipped when missing.
    pub(crate) dirs: Vec<PathBuf>,
    /// Whether the first of `dirs` must exist.
    pub(crate) first_required: bool,
    /// Directories already open (the session temp dir), with the same rights.
    pub(crate) open_dirs: Vec<OwnedFd>,
    /// Single files that may be read, written and truncated, never replaced (cargo's lock
    /// files); skipped when missing.
    pub(crate) files: Vec<PathBuf>,
}

/// Builds the ruleset, requiring every right it handles (no silent best effort: the ABI was
/// detected, so anything the kernel rejects is an error).
pub(crate) fn build_ruleset(
    abi: ABI,
    writable: &Writable,
    block_network: bool,
) -> Result<OwnedFd, String> {
    let landlock_err = |err: landlock::RulesetError| err.to_string();
    let all: BitFlags<AccessFs> = AccessFs::from_all(abi);
    // No device nodes anywhere: mknod of a character or block device fails, also as root.
    let dir_rights = all & !(AccessFs::MakeChar | AccessFs::MakeBlock);
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
    for (i, dir) in writable.dirs.iter().enumerate() {
        let fd = match PathFd::new(dir) {
            Ok(fd) => fd,
            Err(err) if i == 0 && writable.first_required => {
                return Err(format!("{}: {err}", dir.display()));
            }
            Err(_) => continue,
        };
        created = created
            .add_rule(PathBeneath::new(fd, dir_rights))
            .map_err(landlock_err)?;
    }
    for fd in &writable.open_dirs {
        created = created
            .add_rule(PathBeneath::new(fd.as_fd(), dir_rights))
            .map_err(landlock_err)?;
    }
    let file_rights = AccessFs::ReadFile | AccessFs::WriteFile | truncate(abi);
    for file in &writable.files {
        if let Ok(fd) = PathFd::new(file) {
            created = created
                .add_rule(PathBeneath::new(fd, file_rights))
                .map_err(landlock_err)?;
        }
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

/// The truncate right where the ABI has it.
fn truncate(abi: ABI) -> BitFlags<AccessFs> {
    if abi >= ABI::V3 {
        AccessFs::Truncate.into()
    } else {
        BitFlags::EMPTY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let writable = Writable {
                dirs: vec![std::env::temp_dir()],
                first_required: true,
                ..Writable::default()
            };
            let built = build_ruleset(abi_for(level), &writable, true);
            assert!(built.is_ok(), "{built:?}");
            // And the next ABI up is not supported (unless this is the newest known).
            if let Some((next, _)) = ABIS.iter().find(|(_, l)| *l == level + 1) {
                assert!(!probe(*next));
            }
            let missing = Writable {
                dirs: vec![PathBuf::from("/nonexistent/keel")],
                first_required: true,
                ..Writable::default()
            };
            let missing = build_ruleset(ABI::V1, &missing, false);
            assert!(missing.is_err_and(|err| err.contains("/nonexistent/keel")));
        }
    }
}
