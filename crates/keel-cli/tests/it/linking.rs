//! How the `keel` binary is linked. On Linux with glibc, the workspace's `.cargo/config.toml`
//! links the C library statically (a static-pie executable): nothing for the dynamic loader
//! to load or look up before `main`, which is 0.7-0.9 ms of `keel exec`'s start-up
//! (benches/startup.sh). This test fails if that configuration stops reaching the binary (the
//! file removed, the target no longer named, RUSTFLAGS set in the environment, which replaces
//! the file's flags).

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(all(target_os = "linux", target_env = "gnu"))]

const KEEL: &str = env!("CARGO_BIN_EXE_keel");

/// ELF program header types.
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;

/// The program header types of a 64-bit little-endian ELF file, and whether it is position
/// independent (`ET_DYN`).
fn program_headers(elf: &[u8]) -> (Vec<u32>, bool) {
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(elf[4], 2, "not a 64-bit ELF file");
    assert_eq!(elf[5], 1, "not a little-endian ELF file");
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap());
    let u32_at = |at: usize| u32::from_le_bytes(elf[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap());
    let kind = u16_at(0x10);
    let offset = usize::try_from(u64_at(0x20)).unwrap();
    let size = usize::from(u16_at(0x36));
    let count = usize::from(u16_at(0x38));
    let types = (0..count).map(|i| u32_at(offset + i * size)).collect();
    (types, kind == 3)
}

#[test]
fn keel_is_a_static_pie_executable() {
    let elf = std::fs::read(KEEL).unwrap();
    let (types, position_independent) = program_headers(&elf);
    assert!(
        !types.contains(&PT_INTERP),
        "{KEEL} names a dynamic loader: it was linked against shared libraries. Build it in \
         this workspace (whose .cargo/config.toml links glibc statically) and without RUSTFLAGS \
         in the environment"
    );
    // Still position independent, so the kernel loads it at a random address, and still
    // relocated at start (a static-pie's own loader reads its dynamic section).
    assert!(position_independent, "{KEEL} is not position independent");
    assert!(types.contains(&PT_DYNAMIC), "{KEEL} has no dynamic section");
}

#[test]
fn the_elf_reader_tells_a_dynamically_linked_program() {
    // The reader itself, on a program that certainly names a loader: the test running now
    // when it is dynamically linked, else /bin/sh.
    let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    let sh = std::fs::read("/bin/sh").unwrap();
    let (mine, _) = program_headers(&me);
    let (shell, shell_pie) = program_headers(&sh);
    assert!(!mine.contains(&PT_INTERP), "the tests are linked like keel");
    assert!(shell.contains(&PT_INTERP), "/bin/sh is dynamically linked");
    assert!(shell_pie, "/bin/sh is position independent");
}
