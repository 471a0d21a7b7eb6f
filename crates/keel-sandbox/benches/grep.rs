//! The grep tool against ripgrep on the same generated tree of 20,000 source-like files
//! (22 MB in about 2,000 directories), in the same run. `cargo bench -p keel-sandbox --bench
//! grep`
//!
//! Both search the same files with the same options: hidden files searched, `.gitignore`
//! honoured outside a git repository (`rg --hidden --no-require-git`), line numbers. rg is run
//! twice: with `--sort path` (the order the tool returns; rg then searches on one thread) and
//! unsorted (rg's fastest). Before timing, the tool's output is checked to be exactly
//! `rg --sort path`'s. Without `rg` on the PATH only the tool is measured.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::print_stderr)]

use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use keel_sandbox::PathSandbox;
use keel_sandbox::tools::{Grep, GrepArgs};
use keel_tool::{Tool, ToolContext};

const DIRS: usize = 20;
const SUBDIRS: usize = 100;
const FILES_PER_DIR: usize = 10;

/// A few matches: one file in a hundred defines a handler.
const RARE: &str = r"handle_request_[0-9]+\(";
/// No match at all: the whole tree is read and scanned.
const NONE: &str = r"zz_no_such_token_[0-9]+";

/// Writes the tree; returns how many files and bytes.
fn generate(root: &Path) -> (usize, usize) {
    std::fs::write(root.join(".gitignore"), "target/\n*.tmp\n").unwrap();
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut count = 0;
    let mut bytes = 0;
    for d in 0..DIRS {
        for s in 0..SUBDIRS {
            let dir = root.join(format!("crate_{d:02}/src/mod_{s:03}"));
            std::fs::create_dir_all(&dir).unwrap();
            for f in 0..FILES_PER_DIR {
                let mut text = format!(
                    "//! Module {d}/{s}/{f}.\n\nuse crate::util::helper_{};\n\n",
                    next() % 97
                );
                for item in 0..6 {
                    let n = next() % 10_000;
                    text.push_str(&format!(
                        "/// Computes item {item} of {n}.\npub fn compute_{n}_{item}(x: u64) -> u64 {{\n    let value = x.wrapping_mul({n}) + {};\n    if value % 7 == 0 {{\n        return value;\n    }}\n    value\n}}\n\n",
                        next() % 1_000
                    ));
                }
                if count % 100 == 37 {
                    text.push_str(&format!(
                        "pub fn handle_request_{count}(req: &Request) -> Response {{\n    todo!()\n}}\n"
                    ));
                }
                bytes += text.len();
                std::fs::write(dir.join(format!("file_{f}.rs")), text).unwrap();
                count += 1;
            }
        }
    }
    (count, bytes)
}

fn rg(root: &Path, pattern: &str, sorted: bool) -> Vec<u8> {
    let mut command = Command::new("rg");
    command.current_dir(root).args([
        "-n",
        "--no-heading",
        "--color",
        "never",
        "--hidden",
        "--no-require-git",
    ]);
    if sorted {
        command.args(["--sort", "path"]);
    }
    let output = command.args(["-e", pattern]).output().unwrap();
    // 0: matches, 1: none.
    assert!(output.status.code().is_some_and(|c| c <= 1), "{output:?}");
    output.stdout
}

fn rg_available() -> bool {
    Command::new("rg")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn bench(c: &mut Criterion) {
    let tree = tempfile::Builder::new()
        .prefix("keel-grep-bench-")
        .tempdir()
        .unwrap();
    let root = tree.path().canonicalize().unwrap();
    let (files, bytes) = generate(&root);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let grep = Grep::new(Arc::new(PathSandbox::new(&root).unwrap()));
    let ctx = ToolContext::new(&root, "bench");
    let run = |pattern: &str| {
        let args = GrepArgs {
            pattern: pattern.to_owned(),
            max_results: Some(2_000),
            ..GrepArgs::default()
        };
        runtime.block_on(grep.call(args, &ctx)).unwrap()
    };

    let have_rg = rg_available();
    let rare = run(RARE);
    let matches = rare.metadata["matches"].as_u64().unwrap();
    eprintln!(
        "grep bench: {files} files ({} MB) under {}; {matches} lines match {RARE:?}",
        bytes / 1_000_000,
        root.display()
    );
    if have_rg {
        let expected = String::from_utf8(rg(&root, RARE, true)).unwrap();
        assert_eq!(
            rare.content, expected,
            "the tool and `rg --sort path` disagree"
        );
        eprintln!("grep bench: the tool's output is identical to `rg --sort path`'s");
    } else {
        eprintln!(
            "grep bench: `rg` (ripgrep) is not on the PATH, so the comparison with ripgrep is \
             SKIPPED; install it (e.g. `apt-get install ripgrep`) to compare"
        );
    }

    for (name, pattern) in [("rare", RARE), ("none", NONE)] {
        let mut group = c.benchmark_group(format!("grep_20k_files/{name}"));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_secs(2))
            .measurement_time(Duration::from_secs(8));
        group.bench_function("keel_grep", |b| b.iter(|| black_box(run(pattern))));
        if have_rg {
            group.bench_function("rg_sorted", |b| {
                b.iter(|| black_box(rg(&root, pattern, true)))
            });
            group.bench_function("rg_unsorted", |b| {
                b.iter(|| black_box(rg(&root, pattern, false)))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
