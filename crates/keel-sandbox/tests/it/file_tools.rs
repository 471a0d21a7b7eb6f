//! read_file, write_file and patch_file, driven through a registry as the agent loop does.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use keel_provider::{ToolCall, ToolInput};
use keel_sandbox::PathSandbox;
use keel_sandbox::tools::{PatchFile, ReadFile, WriteFile};
use keel_test_support::temp::{TempDir, temp_dir};
use keel_tool::{Effect, ToolContext, ToolOutput, ToolRegistry};
use serde_json::{Value, json};

/// A workspace in a temp dir with the three file tools registered.
struct Workspace {
    dir: TempDir,
    registry: ToolRegistry,
    ctx: ToolContext,
}

impl Workspace {
    fn new() -> Self {
        let dir = temp_dir();
        let sandbox = Arc::new(PathSandbox::new(dir.path().join("ws")).unwrap());
        std::fs::create_dir_all(sandbox.root()).unwrap();
        let registry = ToolRegistry::new()
            .with(ReadFile::new(Arc::clone(&sandbox)))
            .unwrap()
            .with(WriteFile::new(Arc::clone(&sandbox)))
            .unwrap()
            .with(PatchFile::new(sandbox))
            .unwrap();
        let ctx = ToolContext::new(dir.path().join("ws"), "file-tools-test")
            .with_scratch_dir(dir.path().join("scratch"));
        Self { dir, registry, ctx }
    }

    fn root(&self) -> std::path::PathBuf {
        self.dir.path().join("ws")
    }

    /// Writes a fixture file directly (not through the tools).
    fn put(&self, relative: &str, contents: impl AsRef<[u8]>) {
        let path = self.root().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }

    fn contents(&self, relative: &str) -> String {
        std::fs::read_to_string(self.root().join(relative)).unwrap()
    }

    async fn call(&self, name: &str, input: Value) -> ToolOutput {
        let call = ToolCall {
            id: "call_1",
            name,
            input: ToolInput::Valid(&input),
        };
        self.registry.dispatch(call, &self.ctx).await
    }

    async fn ok(&self, name: &str, input: Value) -> String {
        let output = self.call(name, input).await;
        assert!(!output.is_error, "{name} failed: {}", output.content);
        output.content
    }

    async fn err(&self, name: &str, input: Value) -> String {
        let output = self.call(name, input).await;
        assert!(output.is_error, "{name} should fail: {}", output.content);
        output.content
    }
}

fn numbered_lines(count: usize) -> String {
    (1..=count).map(|i| format!("line {i}\n")).collect()
}

// ---- definitions -------------------------------------------------------------------------

#[test]
fn tool_definitions() {
    let ws = Workspace::new();
    let names: Vec<String> = ws
        .registry
        .definitions()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(names, ["patch_file", "read_file", "write_file"]);
    for definition in ws.registry.definitions() {
        insta::assert_json_snapshot!(format!("definition_{}", definition.name), definition);
    }
}

#[test]
fn effects() {
    let ws = Workspace::new();
    let effect = |name: &str, input: Value| {
        ws.registry.effect(ToolCall {
            id: "c",
            name,
            input: ToolInput::Valid(&input),
        })
    };
    assert_eq!(effect("read_file", json!({"path": "a"})), Effect::ReadOnly);
    let write = json!({"path": "a", "content": ""});
    assert_eq!(effect("write_file", write), Effect::Mutating);
    let patch = json!({"path": "a", "old_string": "x", "new_string": "y"});
    assert_eq!(effect("patch_file", patch), Effect::Mutating);
}

// ---- read_file ---------------------------------------------------------------------------

#[tokio::test]
async fn read_whole_small_file_numbered() {
    let ws = Workspace::new();
    let source = "fn main() {\n    println!(\"hi\");\n}\n\n// end\n";
    ws.put("src/main.rs", source);
    let content = ws.ok("read_file", json!({"path": "src/main.rs"})).await;
    // Numbers right-aligned to the widest, a tab, the line; no note for a whole file.
    insta::assert_snapshot!("numbered_read", content);
}

#[tokio::test]
async fn read_ranges() {
    let ws = Workspace::new();
    ws.put("f.txt", numbered_lines(12));
    let middle = ws
        .ok(
            "read_file",
            json!({"path": "f.txt", "start_line": 9, "end_line": 10}),
        )
        .await;
    assert_eq!(
        middle,
        " 9\tline 9\n10\tline 10\n\n[lines 9-10 of 12; call read_file with start_line=11 to read on]\n"
    );
    let tail = ws
        .ok("read_file", json!({"path": "f.txt", "start_line": 11}))
        .await;
    assert_eq!(tail, "11\tline 11\n12\tline 12\n\n[lines 11-12 of 12]\n");
    let head = ws
        .ok("read_file", json!({"path": "f.txt", "end_line": 2}))
        .await;
    assert_eq!(
        head,
        "1\tline 1\n2\tline 2\n\n[lines 1-2 of 12; call read_file with start_line=3 to read on]\n"
    );
    // An end past the file's end is clamped; one line is a valid range.
    let clamped = ws
        .ok(
            "read_file",
            json!({"path": "f.txt", "start_line": 12, "end_line": 500}),
        )
        .await;
    assert_eq!(clamped, "12\tline 12\n\n[lines 12-12 of 12]\n");
}

#[tokio::test]
async fn read_file_without_final_newline_and_with_crlf() {
    let ws = Workspace::new();
    ws.put("crlf.txt", "one\r\ntwo\r\nthree");
    let content = ws.ok("read_file", json!({"path": "crlf.txt"})).await;
    assert_eq!(content, "1\tone\n2\ttwo\n3\tthree\n");
    let last = ws
        .ok("read_file", json!({"path": "crlf.txt", "start_line": 3}))
        .await;
    assert_eq!(last, "3\tthree\n\n[lines 3-3 of 3]\n");
}

#[tokio::test]
async fn read_caps_at_2000_lines_and_says_how_to_read_on() {
    let ws = Workspace::new();
    // Short lines, so the line cap is reached before the character budget.
    let text: String = (1..=5231).map(|i| format!("{i}\n")).collect();
    ws.put("big.txt", text);
    let content = ws.ok("read_file", json!({"path": "big.txt"})).await;
    let lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines[0], "   1\t1");
    assert_eq!(lines[1999], "2000\t2000");
    assert_eq!(lines[2000], "");
    assert_eq!(
        lines[2001],
        "[lines 1-2000 of 5231; call read_file with start_line=2001 to read on]"
    );
    assert_eq!(lines.len(), 2002);
    // Reading on from the note, with an end far beyond the cap.
    let next = ws
        .ok(
            "read_file",
            json!({"path": "big.txt", "start_line": 2001, "end_line": 9000}),
        )
        .await;
    let lines: Vec<&str> = next.lines().collect();
    assert_eq!(lines[0], "2001\t2001");
    assert_eq!(lines[1999], "4000\t4000");
    assert_eq!(
        lines[2001],
        "[lines 2001-4000 of 5231; call read_file with start_line=4001 to read on]"
    );
    let end = ws
        .ok("read_file", json!({"path": "big.txt", "start_line": 5230}))
        .await;
    assert_eq!(end, "5230\t5230\n5231\t5231\n\n[lines 5230-5231 of 5231]\n");
}

#[tokio::test]
async fn read_stops_at_the_character_budget_on_a_line_boundary() {
    let ws = Workspace::new();
    let line = "x".repeat(99);
    ws.put("wide.txt", format!("{line}\n").repeat(1000));
    let content = ws.ok("read_file", json!({"path": "wide.txt"})).await;
    assert!(content.chars().count() <= keel_sandbox::tools::MAX_OUTPUT_CHARS + 200);
    let note = content.lines().last().unwrap();
    // Each line is counted as 105 characters: room for a 4-digit number, a tab, 99
    // characters and a newline.
    let shown = keel_sandbox::tools::MAX_OUTPUT_CHARS / 105;
    assert_eq!(
        note,
        format!(
            "[lines 1-{shown} of 1000, cut at 25,000 characters; call read_file with \
             start_line={} to read on]",
            shown + 1
        )
    );
    let body: Vec<&str> = content.lines().take(shown).collect();
    assert!(
        body.iter().all(|l| l.ends_with(&line)),
        "every shown line is whole"
    );
}

#[tokio::test]
async fn read_cuts_very_long_lines() {
    let ws = Workspace::new();
    let long = "ab".repeat(3000);
    ws.put("min.js", format!("short\n{long}\nafter\n"));
    let content = ws.ok("read_file", json!({"path": "min.js"})).await;
    let lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines[0], "1\tshort");
    let expected = format!(
        "2\t{}… [line cut at 2,000 characters; it has 6,000]",
        &long[..2000]
    );
    assert_eq!(lines[1], expected);
    assert_eq!(lines[2], "3\tafter");
}

#[tokio::test]
async fn read_far_into_a_large_file() {
    let ws = Workspace::new();
    ws.put("large.txt", numbered_lines(200_000));
    let content = ws
        .ok(
            "read_file",
            json!({"path": "large.txt", "start_line": 199_999}),
        )
        .await;
    assert_eq!(
        content,
        "199999\tline 199999\n200000\tline 200000\n\n[lines 199999-200000 of 200000]\n"
    );
}

#[tokio::test]
async fn read_empty_file() {
    let ws = Workspace::new();
    ws.put("empty.txt", "");
    assert_eq!(
        ws.ok("read_file", json!({"path": "empty.txt"})).await,
        "[empty.txt is empty]"
    );
    let err = ws
        .err("read_file", json!({"path": "empty.txt", "start_line": 2}))
        .await;
    assert!(err.contains("which has 0 lines"), "{err}");
}

#[tokio::test]
async fn read_range_errors() {
    let ws = Workspace::new();
    ws.put("f.txt", numbered_lines(1234));
    let past = ws
        .err("read_file", json!({"path": "f.txt", "start_line": 5000}))
        .await;
    assert_eq!(
        past,
        "invalid arguments: start_line 5000 is past the end of f.txt, which has 1,234 lines; \
         give start_line between 1 and 1234"
    );
    let backwards = ws
        .err(
            "read_file",
            json!({"path": "f.txt", "start_line": 10, "end_line": 5}),
        )
        .await;
    assert_eq!(
        backwards,
        "invalid arguments: end_line 5 is before start_line 10; give end_line >= start_line, \
         or leave end_line out to read from start_line on"
    );
    let zero = ws
        .err("read_file", json!({"path": "f.txt", "start_line": 0}))
        .await;
    assert!(zero.contains("lines count from 1"), "{zero}");
    let negative = ws
        .err("read_file", json!({"path": "f.txt", "start_line": -3}))
        .await;
    assert!(
        negative.starts_with("invalid arguments for read_file: start_line"),
        "{negative}"
    );
}

#[tokio::test]
async fn read_refuses_binary_files() {
    let ws = Workspace::new();
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    png.extend(std::iter::repeat_n(b'a', 100));
    ws.put("image.png", &png);
    let err = ws.err("read_file", json!({"path": "image.png"})).await;
    assert_eq!(
        err,
        "image.png is a binary file (it has a NUL byte in its first 8 KiB); read_file works on \
         text files only"
    );
    // A NUL after the first 8 KiB is not looked for.
    let mut late = "a\n".repeat(5000).into_bytes();
    late.push(0);
    ws.put("late-nul.txt", &late);
    ws.ok("read_file", json!({"path": "late-nul.txt", "end_line": 1}))
        .await;
}

#[tokio::test]
async fn read_refuses_directories_and_missing_files() {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.root().join("src/nested")).unwrap();
    let err = ws.err("read_file", json!({"path": "src"})).await;
    assert_eq!(
        err,
        "src is a directory, not a file; use list_directory to see what is in it"
    );
    let root = ws.err("read_file", json!({"path": "."})).await;
    assert!(root.contains("use list_directory"), "{root}");
    let missing = ws.err("read_file", json!({"path": "nope.rs"})).await;
    assert_eq!(missing, "not found: nope.rs: no such file or directory");
}

#[tokio::test]
async fn read_refuses_paths_outside_the_workspace() {
    let ws = Workspace::new();
    let secret = ws.dir.path().join("secret.txt");
    std::fs::write(&secret, "top secret\n").unwrap();
    let err = ws.err("read_file", json!({"path": "../secret.txt"})).await;
    assert!(
        err.starts_with("not allowed: ../secret.txt: outside the workspace"),
        "{err}"
    );
    let absolute = secret.display().to_string();
    let err = ws.err("read_file", json!({"path": absolute})).await;
    assert!(err.contains("outside the workspace"), "{err}");
    std::os::unix::fs::symlink(&secret, ws.root().join("link.txt")).unwrap();
    let err = ws.err("read_file", json!({"path": "link.txt"})).await;
    assert!(
        err.starts_with("not allowed: link.txt: a symlink to"),
        "{err}"
    );
    assert!(!err.contains("top secret"));
}

#[tokio::test]
async fn read_follows_symlinks_inside_the_workspace() {
    let ws = Workspace::new();
    ws.put("real/target.txt", "inside\n");
    std::os::unix::fs::symlink("real/target.txt", ws.root().join("alias.txt")).unwrap();
    let content = ws.ok("read_file", json!({"path": "alias.txt"})).await;
    assert_eq!(content, "1\tinside\n");
}

// ---- write_file --------------------------------------------------------------------------

#[tokio::test]
async fn write_creates_nested_directories() {
    let ws = Workspace::new();
    let content = "x".repeat(1234);
    let report = ws
        .ok(
            "write_file",
            json!({"path": "src/a/b/new.rs", "content": content}),
        )
        .await;
    assert_eq!(report, "wrote 1,234 bytes to src/a/b/new.rs (new file)");
    assert_eq!(ws.contents("src/a/b/new.rs"), content);
    let one = ws
        .ok("write_file", json!({"path": "one.txt", "content": "x"}))
        .await;
    assert_eq!(one, "wrote 1 byte to one.txt (new file)");
    let err = ws
        .err("write_file", json!({"path": "src/a", "content": "x"}))
        .await;
    assert!(err.contains("is a directory"), "{err}");
}

#[tokio::test]
async fn write_creates_a_missing_root() {
    let dir = temp_dir();
    let root = dir.path().join("not/yet");
    let sandbox = Arc::new(PathSandbox::new(&root).unwrap());
    let registry = ToolRegistry::new().with(WriteFile::new(sandbox)).unwrap();
    let input = json!({"path": "hello.txt", "content": "hi\n"});
    let call = ToolCall {
        id: "c",
        name: "write_file",
        input: ToolInput::Valid(&input),
    };
    let output = registry.dispatch(call, &ToolContext::new(&root, "t")).await;
    assert_eq!(output.content, "wrote 3 bytes to hello.txt (new file)");
    assert_eq!(
        std::fs::read_to_string(root.join("hello.txt")).unwrap(),
        "hi\n"
    );
}

#[tokio::test]
async fn write_overwrites_and_keeps_permissions() {
    let ws = Workspace::new();
    ws.put("run.sh", "#!/bin/sh\necho old\n");
    let path = ws.root().join("run.sh");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let report = ws
        .ok(
            "write_file",
            json!({"path": "run.sh", "content": "#!/bin/sh\necho new\n"}),
        )
        .await;
    assert_eq!(
        report,
        "wrote 19 bytes to run.sh (replaced the old content)"
    );
    assert_eq!(ws.contents("run.sh"), "#!/bin/sh\necho new\n");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o755);
}

#[tokio::test]
async fn write_refuses_git_dir_outside_paths_and_escaping_symlinks() {
    let ws = Workspace::new();
    ws.put(".git/config", "[core]\n");
    let err = ws
        .err(
            "write_file",
            json!({"path": ".git/config", "content": "evil"}),
        )
        .await;
    assert_eq!(
        err,
        "not allowed: .git/config: writing inside .git/ is not allowed (the git tools manage \
         the repository)"
    );
    assert_eq!(ws.contents(".git/config"), "[core]\n");

    let err = ws
        .err(
            "write_file",
            json!({"path": "../escape.txt", "content": "x"}),
        )
        .await;
    assert_eq!(err, "not allowed: ../escape.txt: outside the workspace");
    assert!(!ws.dir.path().join("escape.txt").exists());

    let outside = ws.dir.path().join("outside.txt");
    std::fs::write(&outside, "original\n").unwrap();
    std::os::unix::fs::symlink(&outside, ws.root().join("link.txt")).unwrap();
    let err = ws
        .err("write_file", json!({"path": "link.txt", "content": "x"}))
        .await;
    assert!(
        err.starts_with("not allowed: link.txt: a symlink to"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "original\n");

    // A symlinked directory leading out is refused too.
    std::os::unix::fs::symlink(ws.dir.path(), ws.root().join("up")).unwrap();
    let err = ws
        .err(
            "write_file",
            json!({"path": "up/planted.txt", "content": "x"}),
        )
        .await;
    assert!(err.contains("outside the workspace"), "{err}");
    assert!(!ws.dir.path().join("planted.txt").exists());
}

// ---- patch_file --------------------------------------------------------------------------

const LIB: &str = "\
use std::fmt;

pub fn greet(name: &str) -> String {
    let greeting = format!(\"Hello, {name}!\");
    greeting
}

pub fn shout(name: &str) -> String {
    greet(name).to_uppercase()
}
";

#[tokio::test]
async fn patch_replaces_one_occurrence_and_reports_lines() {
    let ws = Workspace::new();
    ws.put("src/lib.rs", LIB);
    let report = ws
        .ok(
            "patch_file",
            json!({
                "path": "src/lib.rs",
                "old_string": "    let greeting = format!(\"Hello, {name}!\");\n    greeting\n",
                "new_string": "    // Say hello.\n    let greeting = format!(\"Hi, {name}!\");\n    \
                               tracing::debug!(%greeting);\n    greeting\n",
            }),
        )
        .await;
    assert_eq!(
        report,
        "patched src/lib.rs: replaced 1 occurrence, lines 4-7 now"
    );
    let patched = ws.contents("src/lib.rs");
    assert!(patched.contains("    // Say hello.\n    let greeting = format!(\"Hi, {name}!\");\n"));
    assert_eq!(patched.lines().nth(6), Some("    greeting"));

    let report = ws
        .ok(
            "patch_file",
            json!({"path": "src/lib.rs", "old_string": "use std::fmt;", "new_string": "use std::fmt::Write;"}),
        )
        .await;
    assert_eq!(
        report,
        "patched src/lib.rs: replaced 1 occurrence, line 1 now"
    );
}

#[tokio::test]
async fn patch_replace_all() {
    let ws = Workspace::new();
    ws.put("src/lib.rs", LIB);
    let report = ws
        .ok(
            "patch_file",
            json!({"path": "src/lib.rs", "old_string": "name: &str", "new_string": "who: &str", "replace_all": true}),
        )
        .await;
    assert_eq!(
        report,
        "patched src/lib.rs: replaced 2 occurrences, lines 3 and 8 now"
    );
    assert_eq!(ws.contents("src/lib.rs").matches("who: &str").count(), 2);
}

#[tokio::test]
async fn patch_deletes_with_an_empty_new_string() {
    let ws = Workspace::new();
    ws.put("notes.txt", "keep\ndrop me\nkeep too\n");
    let report = ws
        .ok(
            "patch_file",
            json!({"path": "notes.txt", "old_string": "drop me\n", "new_string": ""}),
        )
        .await;
    assert_eq!(
        report,
        "patched notes.txt: removed 1 occurrence; the text around it now meets at line 2"
    );
    assert_eq!(ws.contents("notes.txt"), "keep\nkeep too\n");
}

#[tokio::test]
async fn patch_shows_the_closest_lines_when_not_found() {
    let ws = Workspace::new();
    ws.put("src/lib.rs", LIB);
    // Indented with two spaces instead of four.
    let err = ws
        .err(
            "patch_file",
            json!({
                "path": "src/lib.rs",
                "old_string": "  let greeting = format!(\"Hello, {name}!\");\n  greeting",
                "new_string": "  String::new()",
            }),
        )
        .await;
    insta::assert_snapshot!("closest_lines_error", err);
    assert!(err.contains("The most similar lines are 4-5:"), "{err}");
    assert!(err.contains("only in indentation"), "{err}");
    assert_eq!(ws.contents("src/lib.rs"), LIB, "the file is unchanged");

    // Content that changed since it was read: the region is still found.
    let err = ws
        .err(
            "patch_file",
            json!({"path": "src/lib.rs", "old_string": "    greet(name).to_lowercase()", "new_string": "x"}),
        )
        .await;
    assert!(err.contains("The most similar line is 9:\n"), "{err}");
    assert!(
        err.contains(" 9\t    greet(name).to_uppercase()\n"),
        "{err}"
    );
    assert!(err.contains("must match the file exactly"), "{err}");
}

#[tokio::test]
async fn patch_hints_at_line_numbers_and_unrelated_text() {
    let ws = Workspace::new();
    ws.put("src/lib.rs", LIB);
    let err = ws
        .err(
            "patch_file",
            json!({"path": "src/lib.rs", "old_string": "8\tpub fn shout(name: &str) -> String {\n9\t    greet(name).to_uppercase()", "new_string": "x"}),
        )
        .await;
    assert!(
        err.contains("seems to include read_file's line numbers"),
        "{err}"
    );
    let err = ws
        .err(
            "patch_file",
            json!({"path": "src/lib.rs", "old_string": "completely unrelated zebra", "new_string": "x"}),
        )
        .await;
    assert_eq!(
        err,
        "old_string was not found in src/lib.rs. No part of the file resembles it; read the \
         file again with read_file and copy the text to replace exactly."
    );
}

#[tokio::test]
async fn patch_refuses_several_matches() {
    let ws = Workspace::new();
    let mut text = String::new();
    for i in 1..=4 {
        writeln!(text, "fn f{i}() {{\n    todo!()\n}}").unwrap();
    }
    ws.put("src/todo.rs", &text);
    let err = ws
        .err(
            "patch_file",
            json!({"path": "src/todo.rs", "old_string": "    todo!()", "new_string": "    1"}),
        )
        .await;
    insta::assert_snapshot!("multiple_matches_error", err);
    assert!(err.contains("starting at lines 2, 5, 8 and 11"), "{err}");
    assert_eq!(ws.contents("src/todo.rs"), text, "the file is unchanged");
}

#[tokio::test]
async fn patch_argument_errors() {
    let ws = Workspace::new();
    ws.put("a.txt", "alpha\n");
    let empty = ws
        .err(
            "patch_file",
            json!({"path": "a.txt", "old_string": "", "new_string": "beta"}),
        )
        .await;
    assert!(
        empty.starts_with("invalid arguments: old_string is empty"),
        "{empty}"
    );
    assert!(empty.contains("use write_file"), "{empty}");
    let same = ws
        .err(
            "patch_file",
            json!({"path": "a.txt", "old_string": "alpha", "new_string": "alpha"}),
        )
        .await;
    assert!(
        same.contains("old_string and new_string are the same"),
        "{same}"
    );
    let missing = ws
        .err(
            "patch_file",
            json!({"path": "b.txt", "old_string": "a", "new_string": "b"}),
        )
        .await;
    assert_eq!(missing, "not found: b.txt: no such file or directory");
    assert_eq!(ws.contents("a.txt"), "alpha\n");
}

#[tokio::test]
async fn patch_keeps_crlf_line_endings() {
    let ws = Workspace::new();
    ws.put("win.txt", "first\r\nsecond\r\nthird\r\n");
    let report = ws
        .ok(
            "patch_file",
            json!({"path": "win.txt", "old_string": "first\nsecond\n", "new_string": "one\ntwo\nthree-ish\n"}),
        )
        .await;
    assert_eq!(
        report,
        "patched win.txt: replaced 1 occurrence, lines 1-3 now"
    );
    assert_eq!(
        ws.contents("win.txt"),
        "one\r\ntwo\r\nthree-ish\r\nthird\r\n"
    );
    // Arguments that already use \r\n are taken as given.
    ws.ok(
        "patch_file",
        json!({"path": "win.txt", "old_string": "two\r\n", "new_string": "2\r\n"}),
    )
    .await;
    assert_eq!(ws.contents("win.txt"), "one\r\n2\r\nthree-ish\r\nthird\r\n");
}

#[tokio::test]
async fn patch_keeps_permissions_and_lf_files_stay_lf() {
    let ws = Workspace::new();
    ws.put("run.sh", "#!/bin/sh\necho old\n");
    let path = ws.root().join("run.sh");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    ws.ok(
        "patch_file",
        json!({"path": "run.sh", "old_string": "echo old\n", "new_string": "echo new\necho more\n"}),
    )
    .await;
    assert_eq!(ws.contents("run.sh"), "#!/bin/sh\necho new\necho more\n");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o755);
}

#[tokio::test]
async fn patch_refuses_binary_outside_and_git_paths() {
    let ws = Workspace::new();
    ws.put("blob.bin", b"abc\0def");
    let err = ws
        .err(
            "patch_file",
            json!({"path": "blob.bin", "old_string": "abc", "new_string": "x"}),
        )
        .await;
    assert!(err.contains("is a binary file"), "{err}");
    assert!(err.contains("patch_file works on text files only"), "{err}");

    ws.put("latin1.txt", b"caf\xe9\n");
    let err = ws
        .err(
            "patch_file",
            json!({"path": "latin1.txt", "old_string": "caf", "new_string": "x"}),
        )
        .await;
    assert!(err.contains("is not valid UTF-8 (at byte 3)"), "{err}");

    let outside = ws.dir.path().join("outside.txt");
    std::fs::write(&outside, "secret\n").unwrap();
    std::os::unix::fs::symlink(&outside, ws.root().join("link.txt")).unwrap();
    let err = ws
        .err(
            "patch_file",
            json!({"path": "link.txt", "old_string": "secret", "new_string": "x"}),
        )
        .await;
    assert!(
        err.starts_with("not allowed: link.txt: a symlink to"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret\n");

    ws.put(".git/HEAD", "ref: refs/heads/main\n");
    let err = ws
        .err(
            "patch_file",
            json!({"path": ".git/HEAD", "old_string": "main", "new_string": "evil"}),
        )
        .await;
    assert!(err.contains("writing inside .git/ is not allowed"), "{err}");
    assert_eq!(ws.contents(".git/HEAD"), "ref: refs/heads/main\n");
}

#[tokio::test]
async fn patch_then_read_round_trip() {
    let ws = Workspace::new();
    ws.ok(
        "write_file",
        json!({"path": "a/b.txt", "content": "x = 1\ny = 2\n"}),
    )
    .await;
    ws.ok(
        "patch_file",
        json!({"path": "a/b.txt", "old_string": "y = 2", "new_string": "y = 3"}),
    )
    .await;
    let read = ws.ok("read_file", json!({"path": "a/b.txt"})).await;
    assert_eq!(read, "1\tx = 1\n2\ty = 3\n");
}

/// The facts Claude Code's hook shapes are built from (`keel_tool::claude::tool_response`):
/// the absolute path, the text read, the file's text before a write or an edit.
#[tokio::test]
async fn results_carry_the_facts_for_claudes_shapes() {
    let ws = Workspace::new();
    let root = std::fs::canonicalize(ws.root()).unwrap();
    let absolute = root.join("a.py").display().to_string();
    ws.put("a.py", "x = 1\ny = 2\n");

    let read = ws
        .call("read_file", json!({"path": "a.py", "start_line": 2}))
        .await;
    assert_eq!(read.metadata["file_path"], absolute.as_str());
    assert_eq!(read.metadata["content"], "y = 2\n");

    let patched = ws
        .call(
            "patch_file",
            json!({"path": "a.py", "old_string": "x = 1", "new_string": "x = 3"}),
        )
        .await;
    assert_eq!(patched.metadata["file_path"], absolute.as_str());
    assert_eq!(patched.metadata["original"], "x = 1\ny = 2\n");

    let written = ws
        .call("write_file", json!({"path": "a.py", "content": "z\n"}))
        .await;
    assert_eq!(written.metadata["created"], false);
    assert_eq!(written.metadata["original"], "x = 3\ny = 2\n");
    let created = ws
        .call("write_file", json!({"path": "b.py", "content": "b\n"}))
        .await;
    assert_eq!(created.metadata["created"], true);
    assert_eq!(created.metadata["original"], Value::Null);
    assert_eq!(
        created.metadata["file_path"],
        root.join("b.py").display().to_string()
    );
}
