//! The seccomp filter that takes the network away from a command: `socket()` of any family
//! but `AF_UNIX` and `AF_NETLINK` fails with `EPERM`, and so does `io_uring_setup` (whose
//! operations would bypass the filter).
//!
//! The program is compiled once, in the parent, with `seccompiler`. Its first instructions
//! check the architecture of each system call: a call of another architecture (an i386 call
//! through `int 0x80` on x86-64, whose numbers differ) kills the process, so it cannot get
//! around the rules. On x86-64, x32 calls (the same architecture, numbers with bit 30 set)
//! fail with `ENOSYS`, as on a kernel built without x32.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The filter for this process's architecture, built once; `Err` says why it cannot be.
pub(crate) fn network_filter() -> Result<&'static [libc::sock_filter], String> {
    static FILTER: OnceLock<Result<Vec<libc::sock_filter>, String>> = OnceLock::new();
    FILTER
        .get_or_init(build)
        .as_ref()
        .map(Vec::as_slice)
        .map_err(Clone::clone)
}

fn build() -> Result<Vec<libc::sock_filter>, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|err| err.to_string())?;
    let family = |value: libc::c_int| {
        SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            u64::try_from(value).unwrap_or(0),
        )
    };
    let not_local = SeccompRule::new(vec![
        family(libc::AF_UNIX).map_err(|err| err.to_string())?,
        family(libc::AF_NETLINK).map_err(|err| err.to_string())?,
    ])
    .map_err(|err| err.to_string())?;
    let rules: BTreeMap<i64, Vec<SeccompRule>> = [
        (libc::SYS_socket, vec![not_local]),
        (libc::SYS_io_uring_setup, Vec::new()),
    ]
    .into_iter()
    .collect();
    let eperm = u32::try_from(libc::EPERM).unwrap_or(1);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(eperm),
        arch,
    )
    .map_err(|err| err.to_string())?;
    let program = BpfProgram::try_from(filter).map_err(|err| err.to_string())?;
    let mut out = x32_guard();
    out.extend(program.iter().map(|insn| libc::sock_filter {
        code: insn.code,
        jt: insn.jt,
        jf: insn.jf,
        k: insn.k,
    }));
    if u16::try_from(out.len()).is_err() {
        return Err(format!("the seccomp program is too long ({})", out.len()));
    }
    Ok(out)
}

/// On x86-64: instructions that make every x32 system call (numbers with bit 30 set) fail
/// with `ENOSYS`; elsewhere nothing. They fall through to the `seccompiler` program, which
/// starts with its own architecture check.
fn x32_guard() -> Vec<libc::sock_filter> {
    if std::env::consts::ARCH != "x86_64" {
        return Vec::new();
    }
    const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    // Offsets in `struct seccomp_data`: nr at 0, arch at 4.
    let load = |offset: u32| stmt(BPF_LD | BPF_W | BPF_ABS, offset);
    let enosys = u32::try_from(libc::ENOSYS).unwrap_or(38);
    vec![
        load(4),
        // Not x86-64: skip the next three instructions.
        jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
        load(0),
        // Below the x32 bit: skip the return.
        jump(BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, 0, 1),
        stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_ERRNO | enosys),
    ]
}

const BPF_LD: u16 = 0x00;
const BPF_W: u16 = 0x00;
const BPF_ABS: u16 = 0x20;
const BPF_JMP: u16 = 0x05;
const BPF_JEQ: u16 = 0x10;
const BPF_JGE: u16 = 0x30;
const BPF_K: u16 = 0x00;
const BPF_RET: u16 = 0x06;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_builds_and_checks_the_architecture_first() {
        let filter = network_filter().unwrap();
        assert!(filter.len() > 8, "{}", filter.len());
        let guard = x32_guard();
        // After the x32 guard, the seccompiler program loads the architecture and kills on a
        // mismatch.
        let rest = &filter[guard.len()..];
        assert_eq!(rest[0].code, BPF_LD | BPF_W | BPF_ABS);
        assert_eq!(rest[0].k, 4);
        assert_eq!(rest[2].k, libc::SECCOMP_RET_KILL_PROCESS);
    }
}
