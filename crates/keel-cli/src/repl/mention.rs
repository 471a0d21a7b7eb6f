//! `@path` mentions: a prompt naming `@src/lib.rs` goes to the model with that file's content
//! attached after the text, in a `<file path="src/lib.rs">…</file>` block (the text keeps the
//! mention, as Claude Code does).
//!
//! Files are opened through the file tools' [`PathSandbox`] (`open_read`: resolved symlink by
//! symlink, opened beneath its root), so only files inside the sandbox's read roots are ever
//! read. A mention outside them (`@/etc/passwd`, `@../x`, a symlink out) refuses the whole
//! prompt: nothing is sent, one line says why. A mention of nothing (`@alice`), a directory or
//! a binary file is left as text, with a note. Each file is capped at [`MAX_FILE_BYTES`] (the
//! rest cut off, and the block says so), all of a prompt's files at [`MAX_TOTAL_BYTES`].
//!
//! `!!cmd` output rides the same way, in a `<shell command="…">…</shell>` block.

use std::io::Read;

use keel::sandbox::{PathSandbox, SandboxError};

/// The most bytes of one mentioned file that are attached (256 KiB).
pub(super) const MAX_FILE_BYTES: usize = 256 * 1024;
/// The most bytes of mentioned files one prompt attaches (1 MiB).
pub(super) const MAX_TOTAL_BYTES: usize = 1024 * 1024;

/// How a prompt's attached blocks start (each after a blank line, or after a space once the
/// prompt is put on one line).
const BLOCK_STARTS: [&str; 2] = ["<file path=\"", "<shell command=\""];

/// A prompt with its mentioned files attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Attached {
    /// The prompt's text, then one block per attached file.
    pub prompt: String,
    /// One line per mention for the person: attached (with its size), cut, or left as text
    /// and why.
    pub notes: Vec<String>,
}

/// The `@` mentions in `text`: words starting with `@` (at the start or after whitespace),
/// without trailing punctuation; each once, in order.
pub(super) fn mentions(text: &str) -> Vec<&str> {
    let mut found: Vec<&str> = Vec::new();
    for word in text.split_whitespace() {
        let Some(path) = word.strip_prefix('@') else {
            continue;
        };
        let path = path.trim_end_matches([',', ';', ':', '!', '?', ')', ']', '}', '"', '\'', '.']);
        if !path.is_empty() && !found.contains(&path) {
            found.push(path);
        }
    }
    found
}

/// `text` with the files it mentions attached, read through `sandbox`; or, when a mention
/// names a path outside the sandbox's read roots (or one it refuses otherwise), the lines
/// saying so: then nothing may be sent.
pub(super) fn attach(text: &str, sandbox: &PathSandbox) -> Result<Attached, Vec<String>> {
    let mut prompt = text.to_owned();
    let mut notes = Vec::new();
    let mut refused = Vec::new();
    let mut total = 0usize;
    for path in mentions(text) {
        let (_, file) = match sandbox.open_read(path) {
            Ok(opened) => opened,
            Err(SandboxError::NotFound { .. }) => {
                notes.push(format!("@{path}: no such file; left as text"));
                continue;
            }
            // The sandbox's message starts with the path as given.
            Err(err) => {
                refused.push(format!("refused @{err}"));
                continue;
            }
        };
        if file.metadata().is_ok_and(|meta| meta.is_dir()) {
            notes.push(format!(
                "@{path}: a directory; left as text (mention its files)"
            ));
            continue;
        }
        let room = MAX_FILE_BYTES.min(MAX_TOTAL_BYTES.saturating_sub(total));
        if room == 0 {
            notes.push(format!(
                "@{path}: not attached: the mentioned files pass {} KiB",
                MAX_TOTAL_BYTES / 1024
            ));
            continue;
        }
        let size = file.metadata().map_or(0, |meta| meta.len());
        let mut bytes = Vec::new();
        let cap = u64::try_from(room).unwrap_or(u64::MAX);
        if let Err(err) = file.take(cap).read_to_end(&mut bytes) {
            refused.push(format!("@{path}: cannot read: {err}"));
            continue;
        }
        if bytes.contains(&0) {
            notes.push(format!("@{path}: a binary file; left as text"));
            continue;
        }
        let content = text_of(&bytes);
        total += bytes.len();
        let cut = size > cap;
        let attribute = if cut {
            format!(" truncated=\"first {} of {size} bytes\"", bytes.len())
        } else {
            String::new()
        };
        prompt.push_str(&format!(
            "\n\n<file path=\"{}\"{attribute}>\n{content}{}</file>",
            escape_attribute(path),
            if content.ends_with('\n') { "" } else { "\n" }
        ));
        notes.push(if cut {
            format!(
                "attached @{path} (its first {} KiB of {})",
                bytes.len() / 1024,
                human_bytes(size)
            )
        } else {
            format!("attached @{path} ({})", human_bytes(size))
        });
    }
    if refused.is_empty() {
        Ok(Attached { prompt, notes })
    } else {
        Err(refused)
    }
}

/// The block `!!cmd` attaches to the next prompt: the command and what it printed.
pub(super) fn shell_block(command: &str, output: &str) -> String {
    format!(
        "\n\n<shell command=\"{}\">\n{output}{}</shell>",
        escape_attribute(command),
        if output.ends_with('\n') { "" } else { "\n" }
    )
}

/// A prompt as the person typed it: its attached blocks left out (also from a prompt put on
/// one line, as session listings have it).
pub(super) fn typed(prompt: &str) -> &str {
    let end = BLOCK_STARTS
        .iter()
        .flat_map(|start| prompt.match_indices(start))
        .map(|(at, _)| at)
        .filter(|&at| prompt[..at].ends_with(char::is_whitespace))
        .min()
        .unwrap_or(prompt.len());
    prompt[..end].trim_end()
}

/// `bytes` as text: invalid UTF-8 replaced, a character cut at the end dropped.
fn text_of(bytes: &[u8]) -> String {
    let whole = match std::str::from_utf8(bytes) {
        Err(err) if err.error_len().is_none() => &bytes[..err.valid_up_to()],
        _ => bytes,
    };
    String::from_utf8_lossy(whole).into_owned()
}

/// `text` for a double-quoted attribute.
fn escape_attribute(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('\n', " ")
}

/// `812 B`, `3.4 KiB`, `2.0 MiB`.
fn human_bytes(bytes: u64) -> String {
    #[allow(clippy::cast_precision_loss)] // shown with one decimal
    let value = bytes as f64;
    if bytes < 1024 {
        format!("{bytes} B")
    } else if bytes < 1024 * 1024 {
        format!("{:.1} KiB", value / 1024.0)
    } else {
        format!("{:.1} MiB", value / (1024.0 * 1024.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (tempfile::TempDir, PathSandbox) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("work");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "TOP SECRET\n").unwrap();
        let sandbox = PathSandbox::new(&root).unwrap();
        (dir, sandbox)
    }

    #[test]
    fn mentions_are_words_starting_with_an_at_sign() {
        assert_eq!(
            mentions("see @src/lib.rs, and (@a.md) not a@b.com; @src/lib.rs again @ @x."),
            ["src/lib.rs", "x"]
        );
        assert_eq!(mentions("@README.md?"), ["README.md"]);
    }

    #[test]
    fn a_file_inside_is_attached_after_the_text() {
        let (_dir, sandbox) = workspace();
        let attached = attach("explain @src/lib.rs please", &sandbox).unwrap();
        assert_eq!(
            attached.prompt,
            "explain @src/lib.rs please\n\n<file path=\"src/lib.rs\">\npub fn f() {}\n</file>"
        );
        assert_eq!(attached.notes, ["attached @src/lib.rs (14 B)"]);
        assert_eq!(typed(&attached.prompt), "explain @src/lib.rs please");
        let one_line = keel_host::render::one_line(&attached.prompt, 200);
        assert_eq!(typed(&one_line), "explain @src/lib.rs please");
    }

    #[test]
    fn paths_outside_the_roots_refuse_the_prompt() {
        let (dir, sandbox) = workspace();
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), sandbox.root().join("link"))
            .unwrap();
        for text in [
            "read @/etc/passwd",
            "read @../secret.txt",
            "read @link",
            "read @src/../../secret.txt",
            "fine @src/lib.rs but @/etc/hostname",
        ] {
            let refused = attach(text, &sandbox).unwrap_err();
            assert_eq!(refused.len(), 1, "{text}: {refused:?}");
            assert!(refused[0].starts_with("refused @"), "{refused:?}");
            assert!(refused[0].contains("outside the workspace"), "{refused:?}");
        }
    }

    #[test]
    fn nothing_a_directory_or_a_binary_is_left_as_text() {
        let (_dir, sandbox) = workspace();
        std::fs::write(sandbox.root().join("bin.dat"), b"a\0b").unwrap();
        let attached = attach("ask @alice about @src and @bin.dat", &sandbox).unwrap();
        assert_eq!(attached.prompt, "ask @alice about @src and @bin.dat");
        assert_eq!(attached.notes.len(), 3, "{:?}", attached.notes);
    }

    #[test]
    fn a_big_file_is_cut_at_the_cap_and_says_so() {
        let (_dir, sandbox) = workspace();
        let big = "é".repeat(MAX_FILE_BYTES); // two bytes each: twice the cap
        std::fs::write(sandbox.root().join("big.txt"), &big).unwrap();
        let attached = attach("@big.txt", &sandbox).unwrap();
        assert!(
            attached
                .prompt
                .contains("truncated=\"first 262144 of 524288 bytes\"")
        );
        assert!(attached.prompt.len() < MAX_FILE_BYTES + 200);
        assert!(
            attached.notes[0].contains("first 256 KiB"),
            "{:?}",
            attached.notes
        );
    }

    #[test]
    fn attributes_are_escaped() {
        assert_eq!(
            shell_block("echo \"<x>\"", "x"),
            "\n\n<shell command=\"echo &quot;&lt;x>&quot;\">\nx\n</shell>"
        );
    }
}
