//! The gate still asks (issue 13): every ordinary way to delete, truncate or overwrite files
//! is destructive, with a reason a person understands; their harmless neighbours are not.
//! `classify_in` looks at the file system: replacing a file that is not there loses nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt::Write as _;

use keel_sandbox::classify::{classify, classify_in};
use keel_tool::Effect;

/// Every form that deletes, truncates or overwrites files or work, and must be asked.
const DESTRUCTIVE: &[&str] = &[
    // Deleting files.
    "rm f",
    "rm -f f",
    "rm -i f",
    "rmdir d",
    "unlink f",
    "shred f",
    "truncate -s0 f",
    "find . -name '*.log' | xargs rm",
    "find . -print0 | xargs -0 rm -f",
    "find . -delete",
    "find . -exec rm {} \\;",
    "find . -type f -execdir rm {} +",
    // Interpreters' inline code.
    "python3 -c \"import shutil; shutil.rmtree('d')\"",
    "python -c \"import os; os.remove('f')\"",
    "python -c \"import os; os.unlink('f')\"",
    "python3 -c \"import pathlib; pathlib.Path('f').unlink()\"",
    "python3 -c \"import os; os.rmdir('d')\"",
    "python3 -c \"open('f','w')\"",
    "python3 -c \"import pathlib; pathlib.Path('f').write_text('')\"",
    "python3 -c \"import os; os.system('rm -rf d')\"",
    "python3 -c \"import subprocess; subprocess.run(['rm', 'f'])\"",
    "perl -e 'unlink \"f\"'",
    "perl -e 'open(F, \">f\")'",
    "ruby -e 'File.delete(\"f\")'",
    "ruby -e 'require \"fileutils\"; FileUtils.rm_rf(\"d\")'",
    "node -e \"require('fs').rmSync('d', {recursive: true})\"",
    "node -e \"fs.unlinkSync('f')\"",
    "node -e \"require('fs').writeFileSync('f', '')\"",
    "php -r 'unlink(\"f\");'",
    "deno eval \"Deno.removeSync('f')\"",
    // Redirections that truncate.
    "> f",
    ": > f",
    "echo x > f",
    "cat a > b",
    "echo x >| f",
    "make 2> errors.txt",
    // In-place edits.
    "sed -i 's/a/b/' f",
    "sed -i.bak -e '1d' f",
    "sed --in-place=.orig 1d f",
    "perl -pi -e 's/a/b/' f",
    "perl -i.bak -pe 's/a/b/' f",
    "ruby -i -pe 'gsub(/a/, \"b\")' f",
    "gawk -i inplace '{print}' f",
    // Replacing files that may exist.
    "mv a b",
    "mv -f a b",
    "mv a b c dir/",
    "cp a b",
    "cp -r src dst",
    "cp -t dir a",
    "ln -sf target link",
    "ln -f a b",
    "install a /usr/local/bin/a",
    "dd if=a of=b",
    "tee f",
    "echo x | tee f g",
    // Git discarding work.
    "git checkout HEAD~1 -- src/lib.rs",
    "git checkout HEAD file",
    "git checkout main src/lib.rs",
    "git checkout -- file",
    "git checkout .",
    "git checkout -f main",
    "git restore file",
    "git restore --worktree --staged file",
    "git read-tree -u -m HEAD",
    "git read-tree --reset HEAD",
    "git checkout-index -f file",
    "git checkout-index -a -f",
    "git checkout-index -af",
    "git reset --hard",
    "git clean -f",
    "git clean -fdx",
    "git stash drop",
    "git stash clear",
    "git -c alias.x='!rm -rf d' x",
    "git -c core.fsmonitor='rm -rf d' status",
    "git -c core.pager='rm -rf d' log",
    "git --config-env=core.sshCommand=CMD fetch",
    // Computed commands.
    "$(echo rm) -rf d",
    "`echo rm` -rf d",
    "$CMD d",
    "${CMD} d",
    "X=rm; $X f",
    "eval \"$CMD\"",
    "exec $CMD",
    "${CMD/x/rm} f",
    "$HOME/bin/rm f",
    "find . -name '*.c' -exec mv {} old/ \\;",
    // rm behind wrappers and paths.
    "bash -c 'rm f'",
    "sh -c \"bash -c 'unlink f'\"",
    "command rm f",
    "env rm f",
    "env -i PATH=/bin rm f",
    "nice rm f",
    "nice -n 5 rm f",
    "timeout 5 rm f",
    "sudo rm f",
    "busybox rm f",
    "/bin/rm f",
    "\\rm f",
    "nohup rm f",
];

/// Their neighbours that lose nothing: read-only or mutating.
const HARMLESS: &[(&str, &str)] = &[
    ("echo x >> f", "mut"),
    ("cargo build >> build.log 2>&1", "mut"),
    ("ls > /dev/null", "ro"),
    ("ls 2>&1 | tail", "ro"),
    ("ls > /dev/stderr 2> /dev/fd/3", "ro"),
    ("cat a >&2", "ro"),
    ("mv -n a b", "mut"),
    ("mv --no-clobber a b", "mut"),
    ("cp --update=none a b", "mut"),
    ("cp -b a b", "mut"),
    ("ln -s target link", "mut"),
    ("install -d dir", "mut"),
    ("rm --help", "ro"),
    ("rm --version", "ro"),
    ("tee -a f", "mut"),
    ("tee --append f", "mut"),
    ("git checkout -b new", "mut"),
    ("git checkout -b new origin/main", "mut"),
    ("git checkout branch", "mut"),
    ("git read-tree HEAD", "mut"),
    ("git checkout-index file", "mut"),
    ("git restore --staged file", "mut"),
    ("git clean -n", "ro"),
    ("git -c user.name=x commit -m wip", "mut"),
    ("git -c color.ui=never status", "ro"),
    ("git -c alias.st=status st", "mut"),
    ("sed -n p f", "ro"),
    ("sed 's/a/b/' f > /dev/null", "ro"),
    ("python3 -c \"print(1)\"", "mut"),
    (
        "python3 -c \"l=[1]; l.remove(1); print('a'.replace('a', 'b'))\"",
        "mut",
    ),
    ("python3 -c \"print(open('f').read())\"", "mut"),
    ("curl -s https://example.com | python3 -m json.tool", "mut"),
    ("perl -ne 'print if /x/' f", "mut"),
    (
        "node -e \"console.log(require('fs').readFileSync('f', 'utf8'))\"",
        "mut",
    ),
    ("cargo test", "ro"),
    ("cargo build", "ro"),
    ("cargo run", "mut"),
    ("git status && git diff", "ro"),
    ("ls -la; cat f | grep x", "ro"),
    ("echo \"$HOME\"", "ro"),
    ("mkdir -p d && touch d/f", "mut"),
    ("$HOME/.cargo/bin/cargo test", "ro"),
    ("find . -name '*.rs' -exec grep -l foo {} +", "ro"),
];

fn describe(effect: &Effect) -> String {
    match effect {
        Effect::ReadOnly => "ro".to_owned(),
        Effect::Mutating => "mut".to_owned(),
        Effect::Destructive { reason } => format!("destructive: {reason}"),
        other => format!("{other:?}"),
    }
}

#[test]
fn every_deletion_form_is_destructive() {
    assert!(DESTRUCTIVE.len() >= 40, "{}", DESTRUCTIVE.len());
    let wrong: Vec<String> = DESTRUCTIVE
        .iter()
        .filter_map(|command| {
            let effect = classify(command);
            (!matches!(effect, Effect::Destructive { .. }))
                .then(|| format!("{command:?}: {}", describe(&effect)))
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{} not destructive:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn harmless_neighbours_are_not_destructive() {
    let wrong: Vec<String> = HARMLESS
        .iter()
        .filter_map(|(command, expected)| {
            let got = describe(&classify(command));
            (got != *expected).then(|| format!("{command:?}: expected {expected}, got {got}"))
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// The reasons people read, one per form.
#[test]
fn reasons_read_well() {
    let mut text = String::new();
    for command in DESTRUCTIVE {
        writeln!(text, "{command}\n    -> {}", describe(&classify(command))).unwrap();
    }
    insta::assert_snapshot!(text);
}

#[test]
fn classify_in_asks_only_when_a_file_would_be_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("old.txt"), "precious").unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/a"), "precious").unwrap();
    std::fs::write(root.join("a"), "new").unwrap();
    let rows: &[(&str, &str)] = &[
        ("echo x > new.txt", "mut"),
        (
            "echo x > old.txt",
            "destructive: > old.txt empties the existing old.txt first",
        ),
        ("cargo build 2> build.log", "mut"),
        ("cp a b", "mut"),
        (
            "cp a old.txt",
            "destructive: cp onto old.txt replaces what is already there",
        ),
        (
            "cp a sub",
            "destructive: cp onto sub/a replaces what is already there",
        ),
        ("cp a sub/", "destructive: cp onto sub/a replaces"),
        ("mv a fresh", "mut"),
        ("mv a old.txt", "destructive: mv onto old.txt"),
        ("ln -sf a fresh", "mut"),
        ("ln -sf a old.txt", "destructive: ln onto old.txt"),
        ("tee fresh", "mut"),
        (
            "tee old.txt",
            "destructive: tee old.txt empties the existing old.txt",
        ),
        (
            "git checkout old.txt",
            "destructive: git checkout old.txt discards",
        ),
        ("git checkout main", "mut"),
        // After a cd, where files are is unknown.
        (
            "cd sub && echo x > new.txt",
            "destructive: > new.txt empties new.txt first if it exists",
        ),
        (
            "bash -c 'cd sub; cp a b'",
            "destructive: cp onto b replaces what is there, if anything",
        ),
        (
            "env -C sub cp a b",
            "destructive: cp onto b replaces what is there, if anything",
        ),
        ("echo x > $OUT", "destructive: > $OUT empties"),
        ("echo x > *.txt", "destructive"),
        // rm is asked whether or not its file exists.
        ("rm missing", "destructive: rm deletes files"),
    ];
    let wrong: Vec<String> = rows
        .iter()
        .filter_map(|(command, expected)| {
            let got = describe(&classify_in(command, root));
            (!got.starts_with(expected))
                .then(|| format!("{command:?}: expected {expected}, got {got}"))
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    // Without a view of the file system, the same new file may exist.
    assert!(matches!(
        classify("echo x > new.txt"),
        Effect::Destructive { .. }
    ));
}

/// `run_command` judges its command in the workspace root.
#[test]
fn run_command_looks_in_the_workspace() {
    use keel_provider::{ToolCall, ToolInput};
    use keel_sandbox::{PathSandbox, SandboxPolicy, default_tools};
    use serde_json::json;

    let dir = tempfile::tempdir().unwrap();
    let registry = default_tools(
        &PathSandbox::new(dir.path()).unwrap(),
        &SandboxPolicy::default(),
    )
    .unwrap();
    let effect = |command: &str| {
        let input = json!({ "command": command });
        registry.effect(ToolCall {
            id: "c",
            name: "run_command",
            input: ToolInput::Valid(&input),
        })
    };
    assert_eq!(effect("echo x > notes.txt"), Effect::Mutating);
    std::fs::write(dir.path().join("notes.txt"), "precious").unwrap();
    assert!(matches!(
        effect("echo x > notes.txt"),
        Effect::Destructive { .. }
    ));
}
