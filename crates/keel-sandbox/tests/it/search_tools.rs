//! The search tools (list_directory, grep, glob) through a registry, on generated trees.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use keel_provider::{ToolCall, ToolInput};
use keel_sandbox::PathSandbox;
use keel_sandbox::tools::{Glob, GlobArgs, Grep, GrepArgs, ListDirectory, ListDirectoryArgs};
use keel_test_support::temp::{TempDir, temp_dir};
use keel_tool::{
    CancellationToken, Effect, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry,
};
use serde_json::{Value, json};

/// A workspace `ws/` next to a directory `outside/` the sandbox must not reveal.
struct Fixture {
    _tmp: TempDir,
    tmp: PathBuf,
    root: PathBuf,
    outside: PathBuf,
    sandbox: Arc<PathSandbox>,
    registry: ToolRegistry,
}

const SECRET: &str = "TOP-SECRET needle outside";

impl Fixture {
    fn empty() -> Self {
        let tmp_dir = temp_dir();
        let tmp = tmp_dir.path().canonicalize().unwrap();
        let root = tmp.join("ws");
        let outside = tmp.join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(outside.join("dir")).unwrap();
        std::fs::write(outside.join("secret.txt"), format!("{SECRET}\n")).unwrap();
        std::fs::write(outside.join("dir/secret2.txt"), format!("{SECRET} 2\n")).unwrap();
        let sandbox = Arc::new(PathSandbox::new(&root).unwrap());
        let registry = ToolRegistry::new()
            .with(ListDirectory::new(Arc::clone(&sandbox)))
            .unwrap()
            .with(Grep::new(Arc::clone(&sandbox)))
            .unwrap()
            .with(Glob::new(Arc::clone(&sandbox)))
            .unwrap();
        Self {
            _tmp: tmp_dir,
            tmp,
            root,
            outside,
            sandbox,
            registry,
        }
    }

    /// A small project: ignored files, hidden files, a fake `.git`, a binary file.
    fn project() -> Self {
        let fx = Self::empty();
        fx.write(".gitignore", "target/\n*.log\n");
        fx.write(".hidden.toml", "needle = 1\n");
        fx.write(".git/config", "needle in the git config\n");
        fx.write("Cargo.toml", "[package]\nname = \"demo\"\n");
        fx.write("README.md", "# Demo\nTODO: write the docs\n");
        fx.write("build.log", "needle in a log\n");
        fx.write(
            "src/lib.rs",
            "pub mod tools;\n// TODO: needle here\nfn needle() {}\n",
        );
        fx.write("src/main.rs", "fn main() {\n    todo!(\"Needle\");\n}\n");
        fx.write("src/tools/mod.rs", "pub fn needle_tool() {}\n");
        fx.write(
            "src/tools/deep/inner.rs",
            "const NEEDLE: u8 = 1; // needle\n",
        );
        fx.write("src-old.rs", "// needle in src-old\n");
        fx.write("target/debug/gen.rs", "fn needle_generated() {}\n");
        fx.write("docs/guide.md", "Use the needle.\n");
        std::fs::write(
            fx.root.join("data.bin"),
            b"needle\0\x01\x02 binary needle\n",
        )
        .unwrap();
        fx
    }

    fn write(&self, relative: &str, contents: &str) {
        let path = self.root.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }

    fn symlink(&self, target: &Path, relative: &str) {
        std::os::unix::fs::symlink(target, self.root.join(relative)).unwrap();
    }

    async fn call(&self, name: &str, input: Value) -> ToolOutput {
        let ctx = ToolContext::new(&self.root, "search-tools-test");
        let call = ToolCall {
            id: "call_1",
            name,
            input: ToolInput::Valid(&input),
        };
        self.registry.dispatch(call, &ctx).await
    }

    /// Calls a tool that must succeed; returns its text with temp paths replaced.
    async fn ok(&self, name: &str, input: Value) -> String {
        let output = self.call(name, input.clone()).await;
        assert!(!output.is_error, "{name} {input}: {}", output.content);
        self.normalize(&output.content)
    }

    /// Calls a tool that must fail; returns its message with temp paths replaced.
    async fn err(&self, name: &str, input: Value) -> String {
        let output = self.call(name, input.clone()).await;
        assert!(
            output.is_error,
            "{name} {input} should fail: {}",
            output.content
        );
        self.normalize(&output.content)
    }

    fn normalize(&self, text: &str) -> String {
        text.replace(&self.tmp.display().to_string(), "<tmp>")
    }
}

fn set_mtime(path: &Path, secs: u64) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
}

#[test]
fn tool_definitions() {
    let fx = Fixture::empty();
    let definitions = fx.registry.definitions();
    let names: Vec<&str> = definitions.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["glob", "grep", "list_directory"]);
    for definition in definitions {
        keel_tool::validate_definition(&definition).unwrap();
        insta::assert_json_snapshot!(format!("definition_{}", definition.name), definition);
    }
}

#[test]
fn every_search_tool_only_reads() {
    let fx = Fixture::empty();
    for (name, input) in [
        ("list_directory", json!({})),
        ("grep", json!({"pattern": "x"})),
        ("glob", json!({"pattern": "*"})),
    ] {
        let call = ToolCall {
            id: "c",
            name,
            input: ToolInput::Valid(&input),
        };
        assert_eq!(fx.registry.effect(call), Effect::ReadOnly, "{name}");
    }
}

// ---------------------------------------------------------------------------------------------
// list_directory
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn list_directory_shows_a_sorted_tree_honouring_gitignore_without_git() {
    let fx = Fixture::project();
    let text = fx.ok("list_directory", json!({})).await;
    // Hidden files are listed; .git, target/ and *.log are not (no git repository here).
    assert!(text.contains("\n  .hidden.toml\n"), "{text}");
    for absent in [".git/", "target", "build.log", "config"] {
        assert!(!text.contains(absent), "{absent} in {text}");
    }
    // Default depth 2: src/tools/ is shown, its contents are not.
    assert!(text.contains("\n    tools/\n"), "{text}");
    assert!(!text.contains("mod.rs"), "{text}");
    insta::assert_snapshot!("list_directory_default", text);
}

#[tokio::test]
async fn list_directory_depth_and_path() {
    let fx = Fixture::project();
    let one = fx.ok("list_directory", json!({"depth": 1})).await;
    assert!(
        one.contains("\n  src/\n") && !one.contains("lib.rs"),
        "{one}"
    );
    let deep = fx
        .ok("list_directory", json!({"path": "src", "depth": 5}))
        .await;
    insta::assert_snapshot!("list_directory_src_depth_5", deep);
    let err = fx.err("list_directory", json!({"depth": 0})).await;
    assert_eq!(
        err,
        "invalid arguments: depth must be at least 1 (1 lists the directory's own entries)"
    );
}

#[tokio::test]
async fn list_directory_skips_the_ignore_globs() {
    let fx = Fixture::project();
    let text = fx
        .ok(
            "list_directory",
            json!({"ignore": ["tools/", "*.md", "/Cargo.toml"], "depth": 3}),
        )
        .await;
    for absent in ["tools", "README.md", "guide.md", "Cargo.toml"] {
        assert!(!text.contains(absent), "{absent} in {text}");
    }
    assert!(
        text.contains("\n    lib.rs\n") && text.contains("\n  docs/\n"),
        "{text}"
    );
    let err = fx.err("list_directory", json!({"ignore": ["{src"]})).await;
    assert!(
        err.starts_with("invalid arguments: invalid ignore pattern \"{src\""),
        "{err}"
    );
}

#[tokio::test]
async fn list_directory_caps_entries_shallowest_first_and_says_how_to_narrow() {
    let fx = Fixture::empty();
    for i in 0..1_200 {
        fx.write(&format!("many/f{i:04}.txt"), "");
    }
    for i in 0..5 {
        fx.write(&format!("top{i}.txt"), "");
    }
    let text = fx.ok("list_directory", json!({})).await;
    let lines: Vec<&str> = text.lines().collect();
    // Header, 1,000 entries, a blank line, the note.
    assert_eq!(lines.len(), 1 + 1_000 + 2, "{}", lines.len());
    // All top-level entries are kept; the rest of many/ is counted on it.
    assert!(text.contains("\n  many/  [+206 not shown]\n"), "{text}");
    for i in 0..5 {
        assert!(text.contains(&format!("\n  top{i}.txt\n")), "top{i}");
    }
    assert!(text.contains("\n    f0993.txt\n") && !text.contains("f0994"));
    insta::assert_snapshot!("list_directory_cap_note", lines[lines.len() - 1]);
}

#[tokio::test]
async fn list_directory_refuses_bad_paths() {
    let fx = Fixture::project();
    assert_eq!(
        fx.err("list_directory", json!({"path": "../outside"}))
            .await,
        "not allowed: ../outside: outside the workspace (and not in a directory allowed for \
         reading)"
    );
    assert!(
        fx.err("list_directory", json!({"path": "/etc"}))
            .await
            .contains("outside the workspace")
    );
    assert_eq!(
        fx.err("list_directory", json!({"path": "nope"})).await,
        "not found: nope: no such file or directory"
    );
    assert_eq!(
        fx.err("list_directory", json!({"path": "src/lib.rs"}))
            .await,
        "invalid arguments: src/lib.rs is a file, not a directory; read it instead, or list its \
         directory"
    );
}

#[tokio::test]
async fn list_directory_shows_symlinks_without_following_them() {
    let fx = Fixture::empty();
    fx.write("a.txt", "a\n");
    fx.symlink(&fx.outside.join("dir"), "out_dir");
    fx.symlink(&fx.outside.join("secret.txt"), "out_file");
    fx.symlink(Path::new("a.txt"), "in_file");
    let text = fx.ok("list_directory", json!({"depth": 5})).await;
    assert!(!text.contains("secret2"), "{text}");
    insta::assert_snapshot!("list_directory_symlinks", text);
    // Naming the link as the path is refused outright.
    assert!(
        fx.err("list_directory", json!({"path": "out_dir"}))
            .await
            .contains("a symlink to <tmp>/outside/dir, outside the workspace")
    );
}

#[tokio::test]
async fn list_directory_of_an_empty_directory_says_so() {
    let fx = Fixture::empty();
    std::fs::create_dir(fx.root.join("empty")).unwrap();
    assert_eq!(
        fx.ok("list_directory", json!({"path": "empty"})).await,
        "empty/ is empty"
    );
}

// ---------------------------------------------------------------------------------------------
// grep
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn grep_lists_matches_sorted_by_file_then_line() {
    let fx = Fixture::project();
    let text = fx.ok("grep", json!({"pattern": "needle"})).await;
    // Ignored (target/, *.log), .git and binary files are skipped; hidden files are searched.
    for absent in ["target", "build.log", ".git", "data.bin"] {
        assert!(!text.contains(absent), "{absent} in {text}");
    }
    assert!(text.contains(".hidden.toml:1:needle = 1\n"), "{text}");
    // Sorted by path component by component (src/… before src-old.rs), then by line.
    insta::assert_snapshot!("grep_sorted", text);
    let output = fx.call("grep", json!({"pattern": "needle"})).await;
    assert_eq!(output.metadata["binary_files_skipped"], 1);
    assert_eq!(output.metadata["matches"], 7);
}

#[tokio::test]
async fn grep_case_insensitive() {
    let fx = Fixture::project();
    let sensitive = fx.ok("grep", json!({"pattern": "TODO"})).await;
    assert_eq!(
        sensitive,
        "README.md:2:TODO: write the docs\nsrc/lib.rs:2:// TODO: needle here\n"
    );
    let insensitive = fx
        .ok("grep", json!({"pattern": "TODO", "case_insensitive": true}))
        .await;
    assert_eq!(
        insensitive,
        "README.md:2:TODO: write the docs\nsrc/lib.rs:2:// TODO: needle here\nsrc/main.rs:2:    \
         todo!(\"Needle\");\n"
    );
}

#[tokio::test]
async fn grep_glob_filters_files() {
    let fx = Fixture::project();
    let rs = fx
        .ok("grep", json!({"pattern": "needle", "glob": "*.rs"}))
        .await;
    assert_eq!(
        rs,
        "src/lib.rs:2:// TODO: needle here\nsrc/lib.rs:3:fn needle() {}\nsrc/tools/deep/inner.rs:1:const \
         NEEDLE: u8 = 1; // needle\nsrc/tools/mod.rs:1:pub fn needle_tool() {}\nsrc-old.rs:1:// \
         needle in src-old\n"
    );
    let direct = fx
        .ok("grep", json!({"pattern": "needle", "glob": "src/*.rs"}))
        .await;
    assert_eq!(
        direct,
        "src/lib.rs:2:// TODO: needle here\nsrc/lib.rs:3:fn needle() {}\n"
    );
    // Relative to path, or to the root.
    let tools = fx
        .ok(
            "grep",
            json!({"pattern": "needle", "path": "src/tools", "glob": "deep/*.rs"}),
        )
        .await;
    assert_eq!(
        tools,
        "src/tools/deep/inner.rs:1:const NEEDLE: u8 = 1; // needle\n"
    );
    let braces = fx
        .ok("grep", json!({"pattern": "needle", "glob": "*.{md,toml}"}))
        .await;
    assert_eq!(
        braces,
        ".hidden.toml:1:needle = 1\ndocs/guide.md:1:Use the needle.\n"
    );
    let err = fx
        .err("grep", json!({"pattern": "needle", "glob": "*.{rs"}))
        .await;
    assert!(
        err.starts_with("invalid arguments: invalid glob \"*.{rs\": "),
        "{err}"
    );
}

#[tokio::test]
async fn grep_in_one_directory_or_file() {
    let fx = Fixture::project();
    assert_eq!(
        fx.ok("grep", json!({"pattern": "needle", "path": "src/tools"}))
            .await,
        "src/tools/deep/inner.rs:1:const NEEDLE: u8 = 1; // needle\nsrc/tools/mod.rs:1:pub fn \
         needle_tool() {}\n"
    );
    assert_eq!(
        fx.ok("grep", json!({"pattern": "fn", "path": "src/lib.rs"}))
            .await,
        "src/lib.rs:3:fn needle() {}\n"
    );
    // A file named explicitly is searched even when ignored.
    assert_eq!(
        fx.ok("grep", json!({"pattern": "needle", "path": "build.log"}))
            .await,
        "build.log:1:needle in a log\n"
    );
}

#[tokio::test]
async fn grep_caps_results_and_gives_the_total() {
    let fx = Fixture::empty();
    for file in ["b.txt", "a.txt", "c/d.txt"] {
        fx.write(file, &"hit\n".repeat(10));
    }
    let text = fx
        .ok("grep", json!({"pattern": "hit", "max_results": 12}))
        .await;
    let lines: Vec<&str> = text.lines().collect();
    let expected: Vec<String> = (1..=10)
        .map(|n| format!("a.txt:{n}:hit"))
        .chain((1..=2).map(|n| format!("b.txt:{n}:hit")))
        .collect();
    assert_eq!(lines[..12], expected);
    assert_eq!(lines[12], "");
    insta::assert_snapshot!("grep_cap_note", lines[13]);
    assert_eq!(lines.len(), 14);
    assert!(
        fx.err("grep", json!({"pattern": "hit", "max_results": 0}))
            .await
            .contains("max_results must be at least 1")
    );
}

#[tokio::test]
async fn grep_no_matches_is_not_an_error() {
    let fx = Fixture::project();
    assert_eq!(
        fx.ok("grep", json!({"pattern": "haystack"})).await,
        "no matches for \"haystack\" in .\n"
    );
    assert_eq!(
        fx.ok(
            "grep",
            json!({"pattern": "haystack", "path": "src", "glob": "*.rs", "case_insensitive": true})
        )
        .await,
        "no matches for \"haystack\" in src (files matching \"*.rs\", ignoring case)\n"
    );
}

#[tokio::test]
async fn grep_invalid_regex_names_the_problem() {
    let fx = Fixture::project();
    let err = fx.err("grep", json!({"pattern": "fn needle("})).await;
    assert!(
        err.starts_with("invalid arguments: invalid regex \"fn needle(\": "),
        "{err}"
    );
    assert!(err.contains("unclosed group"), "{err}");
    insta::assert_snapshot!("grep_invalid_regex", err);
    assert_eq!(
        fx.err("grep", json!({"pattern": ""})).await,
        "invalid arguments: pattern is empty; give a regular expression to look for"
    );
}

#[tokio::test]
async fn grep_cuts_long_lines_around_the_match() {
    let fx = Fixture::empty();
    let line = format!("{}needle{}", "a".repeat(5_000), "b".repeat(5_000));
    fx.write("min.js", &format!("{line}\n"));
    let text = fx.ok("grep", json!({"pattern": "needle"})).await;
    let expected = format!(
        "min.js:1:…{}needle{}… [line cut: 10006 bytes in all]\n",
        "a".repeat(100),
        "b".repeat(294)
    );
    assert_eq!(text, expected);
}

#[tokio::test]
async fn grep_refuses_paths_outside_and_never_follows_symlinks_out() {
    let fx = Fixture::project();
    fx.symlink(&fx.outside.join("dir"), "out_dir");
    fx.symlink(&fx.outside.join("secret.txt"), "out_file");
    fx.symlink(&fx.outside, "src/out_parent");
    fx.symlink(Path::new("docs/guide.md"), "in_file");
    let text = fx.ok("grep", json!({"pattern": "needle"})).await;
    assert!(!text.contains("SECRET"), "{text}");
    assert!(!text.contains("out_"), "{text}");
    // A symlink to a file inside the workspace is searched, under the link's name.
    assert!(text.contains("\nin_file:1:Use the needle.\n"), "{text}");
    let everything = fx.ok("grep", json!({"pattern": "SECRET"})).await;
    assert_eq!(everything, "no matches for \"SECRET\" in .\n");

    for path in ["../outside", "out_dir", "out_file", "/etc"] {
        let err = fx
            .err("grep", json!({"pattern": "needle", "path": path}))
            .await;
        assert!(err.starts_with("not allowed: "), "{path}: {err}");
        assert!(!err.contains("SECRET"), "{err}");
    }
}

#[tokio::test]
async fn grep_reads_symlinks_into_extra_read_roots() {
    let fx = Fixture::empty();
    fx.symlink(&fx.outside.join("secret.txt"), "allowed.txt");
    fx.symlink(&fx.outside.join("dir"), "allowed_dir");
    let sandbox = PathSandbox::new(&fx.root)
        .unwrap()
        .allow_read(&fx.outside)
        .unwrap();
    let registry = ToolRegistry::new()
        .with(Grep::new(Arc::new(sandbox)))
        .unwrap();
    let input = json!({"pattern": "SECRET"});
    let call = ToolCall {
        id: "c",
        name: "grep",
        input: ToolInput::Valid(&input),
    };
    let output = registry
        .dispatch(call, &ToolContext::new(&fx.root, "s"))
        .await;
    // The file link is read under its own name; the directory link is still not entered.
    assert_eq!(output.content, format!("allowed.txt:1:{SECRET}\n"));
}

#[tokio::test]
async fn grep_stops_when_cancelled() {
    let fx = Fixture::project();
    let token = CancellationToken::new();
    token.cancel();
    let ctx = ToolContext::new(&fx.root, "s").with_cancel(token);
    let grep = Grep::new(Arc::clone(&fx.sandbox));
    let args = GrepArgs {
        pattern: "needle".into(),
        ..GrepArgs::default()
    };
    assert!(matches!(
        grep.call(args, &ctx).await,
        Err(ToolError::Cancelled)
    ));
    let glob = Glob::new(Arc::clone(&fx.sandbox));
    let args = GlobArgs {
        pattern: "**/*".into(),
        ..GlobArgs::default()
    };
    assert!(matches!(
        glob.call(args, &ctx).await,
        Err(ToolError::Cancelled)
    ));
    let list = ListDirectory::new(Arc::clone(&fx.sandbox));
    let result = list.call(ListDirectoryArgs::default(), &ctx).await;
    assert!(matches!(result, Err(ToolError::Cancelled)));
}

// ---------------------------------------------------------------------------------------------
// glob
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn glob_lists_files_newest_first_honouring_gitignore() {
    let fx = Fixture::project();
    let times = [
        ("src/lib.rs", 3_000),
        ("src/main.rs", 1_000),
        ("src/tools/mod.rs", 2_000),
        ("src/tools/deep/inner.rs", 2_000),
        ("src-old.rs", 500),
        ("target/debug/gen.rs", 9_000),
    ];
    for (file, secs) in times {
        set_mtime(&fx.root.join(file), secs);
    }
    let text = fx.ok("glob", json!({"pattern": "**/*.rs"})).await;
    // Newest first, ties by path; target/ is ignored.
    assert_eq!(
        text,
        "src/lib.rs\nsrc/tools/deep/inner.rs\nsrc/tools/mod.rs\nsrc/main.rs\nsrc-old.rs\n"
    );
    // Hidden files are listed, .git is not.
    let all = fx.ok("glob", json!({"pattern": "**/*"})).await;
    assert!(
        all.contains(".hidden.toml\n") && all.contains(".gitignore\n"),
        "{all}"
    );
    assert!(!all.contains(".git/") && !all.contains("target"), "{all}");
    // A plain directory named at the start of the pattern is walked even if ignored.
    assert_eq!(
        fx.ok("glob", json!({"pattern": "target/**/*.rs"})).await,
        "target/debug/gen.rs\n"
    );
}

#[tokio::test]
async fn glob_patterns_are_relative_to_path() {
    let fx = Fixture::project();
    let mut direct = fx
        .ok("glob", json!({"pattern": "src/*.rs"}))
        .await
        .lines()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    direct.sort();
    assert_eq!(direct, ["src/lib.rs", "src/main.rs"]);
    assert_eq!(
        fx.ok("glob", json!({"pattern": "*.rs", "path": "src/tools"}))
            .await,
        "src/tools/mod.rs\n"
    );
    assert_eq!(
        fx.ok(
            "glob",
            json!({"pattern": "./deep/inner.rs", "path": "src/tools"})
        )
        .await,
        "src/tools/deep/inner.rs\n"
    );
    // Only files: a directory never matches.
    assert_eq!(
        fx.ok("glob", json!({"pattern": "src/tools/deep"})).await,
        "no files match \"src/tools/deep\" in .\n"
    );
    let none = fx.ok("glob", json!({"pattern": "*.md"})).await;
    assert_eq!(none, "README.md\n");
    let none = fx.ok("glob", json!({"pattern": "*.py"})).await;
    insta::assert_snapshot!("glob_no_match_hint", none);
    assert_eq!(
        fx.ok("glob", json!({"pattern": "nothere/**/*.rs"})).await,
        "no files match \"nothere/**/*.rs\" in .\n"
    );
}

#[tokio::test]
async fn glob_caps_at_500_with_a_note() {
    let fx = Fixture::empty();
    for i in 0..510 {
        let file = format!("gen/f{i:03}.txt");
        fx.write(&file, "");
        set_mtime(&fx.root.join(&file), 1_000 + i);
    }
    let text = fx.ok("glob", json!({"pattern": "gen/*.txt"})).await;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 502);
    assert_eq!(lines[0], "gen/f509.txt");
    assert_eq!(lines[499], "gen/f010.txt");
    insta::assert_snapshot!("glob_cap_note", lines[501]);
}

#[tokio::test]
async fn glob_refuses_bad_patterns_and_paths() {
    let fx = Fixture::project();
    let cases = [
        json!({"pattern": "*.{rs"}),
        json!({"pattern": "/etc/*"}),
        json!({"pattern": "../outside/*"}),
        json!({"pattern": ""}),
        json!({"pattern": "*", "path": "../outside"}),
        json!({"pattern": "*", "path": "src/lib.rs"}),
        json!({"pattern": "*", "path": "missing"}),
    ];
    let mut report = String::new();
    for input in cases {
        let err = fx.err("glob", input.clone()).await;
        report.push_str(&format!("{input}\n  {err}\n"));
    }
    insta::assert_snapshot!("glob_errors", report);
}

#[tokio::test]
async fn glob_never_follows_symlinks_out() {
    let fx = Fixture::empty();
    fx.write("a.txt", "a\n");
    fx.symlink(&fx.outside.join("dir"), "out_dir");
    fx.symlink(&fx.outside.join("secret.txt"), "out_file.txt");
    fx.symlink(Path::new("a.txt"), "in_file.txt");
    let mut found: Vec<String> = fx
        .ok("glob", json!({"pattern": "**/*.txt"}))
        .await
        .lines()
        .map(str::to_owned)
        .collect();
    found.sort();
    assert_eq!(found, ["a.txt", "in_file.txt"]);
    assert_eq!(
        fx.ok("glob", json!({"pattern": "out_dir/*.txt"})).await,
        "no files match \"out_dir/*.txt\" in .\n"
    );
}
