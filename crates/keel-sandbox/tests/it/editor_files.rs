//! The file tools through an editor's buffers (`ToolContext::with_editor_files`, what an ACP
//! client's `fs/read_text_file` and `fs/write_text_file` back): reads see the buffer, edits go
//! to the editor, and the sandbox's checks come first — a path it refuses never reaches the
//! editor.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use keel_provider::{ToolCall, ToolInput};
use keel_sandbox::PathSandbox;
use keel_sandbox::tools::{PatchFile, ReadFile, WriteFile};
use keel_test_support::temp::{TempDir, temp_dir};
use keel_tool::{EditorFiles, ToolContext, ToolOutput, ToolRegistry};
use serde_json::{Value, json};

/// An editor holding buffers in memory; it records every path it is asked about.
#[derive(Debug, Default)]
struct Editor {
    buffers: Mutex<HashMap<PathBuf, String>>,
    asked: Mutex<Vec<String>>,
    reads: bool,
    writes: bool,
    refuse_writes: bool,
}

#[async_trait::async_trait]
impl EditorFiles for Editor {
    fn reads(&self) -> bool {
        self.reads
    }

    fn writes(&self) -> bool {
        self.writes
    }

    async fn read_text(&self, path: &Path) -> Result<String, String> {
        self.asked
            .lock()
            .unwrap()
            .push(format!("read {}", path.display()));
        self.buffers
            .lock()
            .unwrap()
            .get(path)
            .cloned()
            .ok_or_else(|| "no buffer".to_owned())
    }

    async fn write_text(&self, path: &Path, text: &str) -> Result<(), String> {
        self.asked
            .lock()
            .unwrap()
            .push(format!("write {}", path.display()));
        if self.refuse_writes {
            return Err("the buffer is read-only".to_owned());
        }
        self.buffers
            .lock()
            .unwrap()
            .insert(path.to_path_buf(), text.to_owned());
        Ok(())
    }
}

struct Workspace {
    dir: TempDir,
    registry: ToolRegistry,
    editor: Arc<Editor>,
    ctx: ToolContext,
}

impl Workspace {
    fn new(editor: Editor) -> Self {
        let dir = temp_dir();
        let root = dir.path().join("ws");
        std::fs::create_dir_all(&root).unwrap();
        let root = root.canonicalize().unwrap();
        let sandbox = Arc::new(PathSandbox::new(&root).unwrap());
        let registry = ToolRegistry::new()
            .with(ReadFile::new(Arc::clone(&sandbox)))
            .unwrap()
            .with(WriteFile::new(Arc::clone(&sandbox)))
            .unwrap()
            .with(PatchFile::new(sandbox))
            .unwrap();
        let editor = Arc::new(editor);
        let ctx = ToolContext::new(&root, "editor-files-test")
            .with_scratch_dir(dir.path().join("scratch"))
            .with_editor_files(editor.clone());
        Self {
            dir,
            registry,
            editor,
            ctx,
        }
    }

    fn both() -> Self {
        Self::new(Editor {
            reads: true,
            writes: true,
            ..Editor::default()
        })
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("ws").canonicalize().unwrap()
    }

    fn put(&self, relative: &str, contents: &str) {
        let path = self.root().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }

    fn buffer(&self, relative: &str, text: &str) {
        self.editor
            .buffers
            .lock()
            .unwrap()
            .insert(self.root().join(relative), text.to_owned());
    }

    fn buffered(&self, relative: &str) -> Option<String> {
        self.editor
            .buffers
            .lock()
            .unwrap()
            .get(&self.root().join(relative))
            .cloned()
    }

    fn disk(&self, relative: &str) -> String {
        std::fs::read_to_string(self.root().join(relative)).unwrap()
    }

    fn asked(&self) -> Vec<String> {
        let root = self.root().display().to_string();
        self.editor
            .asked
            .lock()
            .unwrap()
            .iter()
            .map(|line| line.replace(&root, "<ws>"))
            .collect()
    }

    async fn call(&self, name: &str, input: Value) -> ToolOutput {
        let call = ToolCall {
            id: "call_1",
            name,
            input: ToolInput::Valid(&input),
        };
        self.registry.dispatch(call, &self.ctx).await
    }
}

#[tokio::test]
async fn read_file_shows_the_editor_s_unsaved_buffer() {
    let ws = Workspace::both();
    ws.put("src/lib.rs", "fn on_disk() {}\n");
    ws.buffer("src/lib.rs", "fn unsaved() {}\nfn second() {}\n");
    let output = ws
        .call("read_file", json!({"path": "src/lib.rs", "start_line": 2}))
        .await;
    assert!(!output.is_error, "{}", output.content);
    assert_eq!(
        output.content, "2\tfn second() {}\n\n[lines 2-2 of 2]\n",
        "the numbering and notes are the disk's"
    );
    assert_eq!(ws.asked(), ["read <ws>/src/lib.rs"]);
}

#[tokio::test]
async fn a_file_the_editor_does_not_have_is_read_from_disk() {
    let ws = Workspace::both();
    ws.put("notes.txt", "on disk\n");
    let output = ws.call("read_file", json!({"path": "notes.txt"})).await;
    assert_eq!(output.content, "1\ton disk\n");
    assert_eq!(ws.asked(), ["read <ws>/notes.txt"]);
}

#[tokio::test]
async fn a_binary_buffer_is_refused_as_a_binary_file_is() {
    let ws = Workspace::both();
    ws.put("blob", "x");
    ws.buffer("blob", "a\0b");
    let output = ws.call("read_file", json!({"path": "blob"})).await;
    assert!(output.is_error);
    assert!(output.content.contains("binary file"), "{}", output.content);
}

#[tokio::test]
async fn patch_file_edits_the_buffer_and_the_editor_writes_it() {
    let ws = Workspace::both();
    ws.put("src/lib.rs", "pub fn answer() -> u32 { 41 }\n");
    ws.buffer(
        "src/lib.rs",
        "// unsaved comment\npub fn answer() -> u32 { 41 }\n",
    );
    let output = ws
        .call(
            "patch_file",
            json!({"path": "src/lib.rs", "old_string": "41", "new_string": "42"}),
        )
        .await;
    assert!(!output.is_error, "{}", output.content);
    assert!(
        output.content.contains("replaced 1 occurrence, line 2 now"),
        "{}",
        output.content
    );
    assert_eq!(
        ws.buffered("src/lib.rs").unwrap(),
        "// unsaved comment\npub fn answer() -> u32 { 42 }\n"
    );
    // The editor saves when it will; keel did not write behind its back.
    assert_eq!(ws.disk("src/lib.rs"), "pub fn answer() -> u32 { 41 }\n");
    assert_eq!(
        ws.asked(),
        ["read <ws>/src/lib.rs", "write <ws>/src/lib.rs"]
    );
}

#[tokio::test]
async fn an_editor_that_only_reads_leaves_writes_to_the_disk() {
    let ws = Workspace::new(Editor {
        reads: true,
        ..Editor::default()
    });
    ws.put("a.txt", "old\n");
    ws.buffer("a.txt", "old unsaved\n");
    let output = ws
        .call(
            "patch_file",
            json!({"path": "a.txt", "old_string": "unsaved", "new_string": "saved"}),
        )
        .await;
    assert!(!output.is_error, "{}", output.content);
    assert_eq!(ws.disk("a.txt"), "old saved\n");
    assert_eq!(ws.asked(), ["read <ws>/a.txt"]);
}

#[tokio::test]
async fn write_file_sends_an_existing_file_to_the_editor_and_makes_a_new_one_on_disk() {
    let ws = Workspace::both();
    ws.put("old.txt", "before\n");
    let output = ws
        .call(
            "write_file",
            json!({"path": "old.txt", "content": "after\n"}),
        )
        .await;
    assert!(!output.is_error, "{}", output.content);
    assert_eq!(ws.buffered("old.txt").unwrap(), "after\n");
    let output = ws
        .call(
            "write_file",
            json!({"path": "new/dir/file.txt", "content": "fresh\n"}),
        )
        .await;
    assert!(!output.is_error, "{}", output.content);
    assert!(output.content.contains("new file"), "{}", output.content);
    assert_eq!(ws.disk("new/dir/file.txt"), "fresh\n");
    assert_eq!(ws.asked(), ["write <ws>/old.txt"]);
}

#[tokio::test]
async fn an_editor_that_cannot_write_is_the_model_s_error() {
    let ws = Workspace::new(Editor {
        reads: true,
        writes: true,
        refuse_writes: true,
        ..Editor::default()
    });
    ws.put("a.txt", "one\n");
    let output = ws
        .call("write_file", json!({"path": "a.txt", "content": "two\n"}))
        .await;
    assert!(output.is_error);
    assert!(
        output
            .content
            .contains("the editor could not write a.txt: the buffer is read-only"),
        "{}",
        output.content
    );
    assert_eq!(ws.disk("a.txt"), "one\n");
}

/// Hostile paths from a model: outside the workspace, through a symlink that leads out, and
/// into `.git`. Each is refused as on disk, and the editor is never asked about it.
#[tokio::test]
async fn paths_the_sandbox_refuses_never_reach_the_editor() {
    let ws = Workspace::both();
    let outside = ws.dir.path().join("outside.txt");
    std::fs::write(&outside, "secret\n").unwrap();
    ws.buffer("../outside.txt", "secret buffer\n");
    std::os::unix::fs::symlink(&outside, ws.root().join("link.txt")).unwrap();
    std::fs::create_dir_all(ws.root().join(".git")).unwrap();
    ws.put(".git/config", "[core]\n");
    let calls = [
        ("read_file", json!({"path": "../outside.txt"})),
        ("read_file", json!({"path": outside})),
        ("read_file", json!({"path": "link.txt"})),
        (
            "patch_file",
            json!({"path": "link.txt", "old_string": "secret", "new_string": "x"}),
        ),
        (
            "write_file",
            json!({"path": "../outside.txt", "content": "x"}),
        ),
        (
            "patch_file",
            json!({"path": ".git/config", "old_string": "core", "new_string": "x"}),
        ),
        ("write_file", json!({"path": ".git/config", "content": "x"})),
    ];
    for (tool, input) in calls {
        let output = ws.call(tool, input.clone()).await;
        assert!(output.is_error, "{tool} {input}: {}", output.content);
        assert!(!output.content.contains("secret"), "{}", output.content);
    }
    assert_eq!(ws.asked(), Vec::<String>::new());
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret\n");
    assert_eq!(ws.disk(".git/config"), "[core]\n");
}
