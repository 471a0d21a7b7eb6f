//! The recorded wire streams in `shared/wire/` (see its README), read byte for byte.

use std::path::PathBuf;

/// The folder of recordings: `$KEEL_WIRE_DIR`, else `shared/wire` beside the checkout.
pub fn wire_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("KEEL_WIRE_DIR") {
        return PathBuf::from(dir);
    }
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let beside = workspace.join("../shared/wire");
    if beside.is_dir() {
        return beside;
    }
    panic!(
        "recorded wire streams not found at {}: set KEEL_WIRE_DIR to the shared/wire folder",
        beside.display()
    )
}

/// The bytes of one recording, e.g. `anthropic/basic_response.sse`.
pub fn wire_bytes(name: &str) -> Vec<u8> {
    let path = wire_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}

/// The names (relative to [`wire_dir`]) of every `.sse` recording under `subdir`, sorted.
pub fn wire_files(subdir: &str) -> Vec<String> {
    let dir = wire_dir().join(subdir);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("cannot list {}: {err}", dir.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".sse"))
        .map(|name| format!("{subdir}/{name}"))
        .collect();
    names.sort();
    names
}
