//! What a shell command does to the world, judged from its text before it runs.
//!
//! [`classify`] reads a command the way `bash` would split it (quotes, escapes, `&&`, `||`,
//! `;`, `|`, `$(...)`, backticks, `bash -c '...'`, `eval`, `xargs`, `find -exec`, wrappers
//! such as `env`, `command`, `time`, `nice`, `timeout`, `sudo`, `busybox`, leading `FOO=1`
//! assignments, redirections) and judges every simple command in it. The verdict is the most
//! severe part:
//!
//! - [`Effect::ReadOnly`]: only commands known to read (`ls`, `cat`, `grep`, `rg`,
//!   `git status`, `cargo check`, `find` without `-delete`/`-exec`, ...), with no redirection
//!   into a file.
//! - [`Effect::Destructive`]: something that deletes, truncates or overwrites files or work,
//!   or is hard to undo: `rm` (any form), `unlink`, `rmdir`, `shred`, `truncate`,
//!   `find -delete`, `> file` (a redirection that empties a file that may exist), `sed -i`,
//!   `perl -i`, `mv`/`cp`/`ln -f`/`install` onto a file that may exist, `tee` without `-a`,
//!   `dd of=`, interpreters' inline code that deletes or writes files (`python -c
//!   "shutil.rmtree(...)"`, `node -e "fs.rmSync(...)"`), `git reset --hard`, `git clean`,
//!   `git checkout <rev> <paths>`, `git read-tree -u`, `git checkout-index -f`,
//!   `git -c alias.x='!...'`, `git push --force`, a computed command word (`$(echo rm)`,
//!   `$CMD`), `chmod -R`, `mkfs`, `curl ... | sh`, `sudo`, `DROP TABLE`, `> /dev/sda`, ....
//!   The reason names what it does, e.g. `rm -rf deletes files recursively`.
//! - [`Effect::Mutating`]: everything else, including every command it does not know, and
//!   appending (`>> log`).
//!
//! [`classify_in`] also looks at the directory the command runs in: replacing a file that is
//! not there loses nothing, so `echo x > new.txt` is only mutating there.
//!
//! This is advice for scheduling and approvals, not a security boundary: the kernel
//! confinement of `run_command` is what limits a command, and what the classifier cannot see
//! through (obfuscated or computed commands it does not flag) is left to workspace snapshots.
//!
//! ```
//! use keel_sandbox::classify::classify;
//! use keel_tool::Effect;
//!
//! assert_eq!(classify("git status && cargo check 2>&1 | tail -n 20"), Effect::ReadOnly);
//! assert_eq!(classify("cargo build >> build.log"), Effect::Mutating);
//! assert_eq!(
//!     classify("cd target && FOO=1 bash -c 'rm -rf debug'"),
//!     Effect::destructive("rm -rf deletes files recursively")
//! );
//! ```

use std::path::{Path, PathBuf};

use keel_tool::Effect;

mod files;
mod git;
mod interp;
mod lex;

/// How deep `bash -c`, `eval`, `$(...)` and the like are followed; deeper is `Mutating`.
const MAX_DEPTH: usize = 8;

/// Judges what `command`, a `bash` command line, does: the most severe effect of its parts.
/// Unknown commands are [`Effect::Mutating`].
///
/// Without a view of the file system, every file a command may replace (`> f`, `mv a b`,
/// `cp a b`, `tee f`) is taken to exist: such commands are destructive. [`classify_in`]
/// looks first.
pub fn classify(command: &str) -> Effect {
    judge(command, None)
}

/// Like [`classify`], for a command that runs in `dir`: a file a command would replace
/// (`> f`, `mv a b`, `cp a b`, `ln -sf a b`, `tee f`, `git checkout f`) that does not exist
/// there loses nothing, so writing it is [`Effect::Mutating`], not destructive. After a `cd`
/// (or a name with `$`, globs, `~`), the classifier no longer knows where it is and takes
/// every such file to exist, as [`classify`] does.
pub fn classify_in(command: &str, dir: &Path) -> Effect {
    judge(command, Some(dir.to_path_buf()))
}

fn judge(command: &str, dir: Option<PathBuf>) -> Effect {
    let mut verdict = Verdict {
        dir,
        ..Verdict::default()
    };
    check_sql(command, &mut verdict);
    classify_source(command, 0, &mut verdict);
    verdict.into_effect()
}

/// Whether a file a command names is there, as far as the classifier can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Presence {
    Present,
    Absent,
    Unknown,
}

/// The verdict so far: whether anything mutates, and why anything is destructive.
#[derive(Debug, Default)]
struct Verdict {
    mutating: bool,
    reasons: Vec<String>,
    /// The directory the command runs in, while it is known.
    dir: Option<PathBuf>,
}

impl Verdict {
    /// Whether `target` exists, relative to the known directory.
    fn presence(&self, target: &str) -> Presence {
        let Some(dir) = &self.dir else {
            return Presence::Unknown;
        };
        if target.is_empty()
            || target.contains(['$', '`', '*', '?', '[', '{'])
            || target.starts_with('~')
        {
            return Presence::Unknown;
        }
        match std::fs::symlink_metadata(dir.join(target)) {
            Ok(_) => Presence::Present,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Presence::Absent,
            Err(_) => Presence::Unknown,
        }
    }

    /// Whether `path` is known to be a directory.
    fn presence_is_dir(&self, path: &Path) -> bool {
        self.dir.as_ref().is_some_and(|dir| dir.join(path).is_dir())
    }

    /// The command changed directory: where files are is no longer known.
    fn lose_dir(&mut self) {
        self.dir = None;
    }

    fn mutating(&mut self) {
        self.mutating = true;
    }

    fn destructive(&mut self, reason: impl Into<String>) {
        let reason = reason.into();
        if !self.reasons.contains(&reason) {
            self.reasons.push(reason);
        }
    }

    fn into_effect(self) -> Effect {
        if !self.reasons.is_empty() {
            Effect::destructive(self.reasons.join("; "))
        } else if self.mutating {
            Effect::Mutating
        } else {
            Effect::ReadOnly
        }
    }
}

/// SQL that destroys data, found anywhere in the text (`psql -c "drop table t"`).
fn check_sql(command: &str, verdict: &mut Verdict) {
    let normalized = command
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_uppercase();
    for (needle, reason) in [
        ("DROP TABLE", "DROP TABLE deletes a database table"),
        ("DROP DATABASE", "DROP DATABASE deletes a database"),
        ("DROP SCHEMA", "DROP SCHEMA deletes a database schema"),
        (
            "TRUNCATE TABLE",
            "TRUNCATE TABLE deletes every row of a table",
        ),
    ] {
        if normalized.contains(needle) {
            verdict.destructive(reason);
        }
    }
}

fn classify_source(source: &str, depth: usize, verdict: &mut Verdict) {
    if depth > MAX_DEPTH {
        verdict.mutating();
        return;
    }
    let parsed = lex::parse(source);
    for simple in parsed.simples {
        for write in &simple.writes {
            files::check_write(&write.op, &write.target, write.truncates, verdict);
        }
        classify_words(&simple.words, simple.piped_from.as_deref(), depth, verdict);
    }
    for nested in &parsed.nested {
        classify_source(nested, depth + 1, verdict);
    }
}

/// Shell keywords that may start a simple command without being its program.
const KEYWORDS: [&str; 14] = [
    "if", "then", "elif", "else", "fi", "do", "done", "while", "until", "!", "{", "}", "esac", "in",
];

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let name = name.strip_suffix('+').unwrap_or(name);
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `args` has short option `flag`, alone or in a cluster (`-rf`), before `--`.
fn has_short(args: &[String], flag: char) -> bool {
    args.iter().take_while(|arg| *arg != "--").any(|arg| {
        arg.len() > 1 && arg.starts_with('-') && !arg.starts_with("--") && arg[1..].contains(flag)
    })
}

/// Whether `args` has long option `flag` (`--force`, or `--force=...`), before `--`.
fn has_long(args: &[String], flag: &str) -> bool {
    args.iter().take_while(|arg| *arg != "--").any(|arg| {
        arg.strip_prefix(flag)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('='))
    })
}

/// Arguments that are not options.
fn positionals(args: &[String]) -> impl Iterator<Item = &String> {
    args.iter()
        .filter(|arg| !arg.starts_with('-') || arg.as_str() == "-")
}

/// Skips wrapper options at the front of `words[at..]`: `with_value` take the next word.
fn skip_options(words: &[String], mut at: usize, with_value: &[&str]) -> usize {
    while let Some(word) = words.get(at) {
        if word == "--" {
            return at + 1;
        }
        if !word.starts_with('-') || word.len() == 1 {
            break;
        }
        at += if with_value.contains(&word.as_str()) {
            2
        } else {
            1
        };
    }
    at
}

fn classify_words(
    words: &[String],
    piped_from: Option<&[String]>,
    depth: usize,
    verdict: &mut Verdict,
) {
    if depth > MAX_DEPTH {
        verdict.mutating();
        return;
    }
    let mut at = 0;
    while words
        .get(at)
        .is_some_and(|word| KEYWORDS.contains(&word.as_str()))
    {
        at += 1;
    }
    let Some(at) = skip_wrappers(words, at, depth, verdict) else {
        return;
    };
    let Some(program_word) = words.get(at) else {
        return;
    };
    if is_computed(program_word) {
        verdict.destructive(format!(
            "the command is computed ({program_word}); keel cannot see what it runs"
        ));
        return;
    }
    let program = basename(program_word);
    let args = &words[at + 1..];
    if ["cd", "pushd", "popd"].contains(&program) {
        verdict.lose_dir();
    }
    classify_program(program, args, piped_from, depth, verdict);
}

/// Wrappers that run the rest of the words as a command (`env`, `sudo`, `timeout`, `xargs`,
/// ...), from `words[at]` on: the index of the command they run, or `None` when nothing is
/// left to judge (no command, `command -v`, a bare `xargs`, or a script of `env -S` or
/// `watch`, judged here).
fn skip_wrappers(
    words: &[String],
    mut at: usize,
    depth: usize,
    verdict: &mut Verdict,
) -> Option<usize> {
    loop {
        while words.get(at).is_some_and(|word| is_assignment(word)) {
            at += 1;
        }
        let program = basename(words.get(at)?);
        let next = match program {
            "env" => skip_env(words, at, depth, verdict)?,
            "command" => {
                let rest = &words[at + 1..];
                if rest.first().is_some_and(|w| w == "-v" || w == "-V") {
                    return None;
                }
                skip_options(words, at + 1, &[])
            }
            "builtin" | "nohup" | "exec" | "time" | "stdbuf" | "setsid" => {
                skip_options(words, at + 1, &["-a", "-f", "-o", "-i", "-e"])
            }
            "nice" | "ionice" | "chrt" | "taskset" => {
                skip_options(words, at + 1, &["-n", "-c", "-p", "--adjustment"])
            }
            "timeout" => skip_options(words, at + 1, &["-s", "--signal", "-k", "--kill-after"]) + 1,
            "watch" => {
                let from = skip_options(words, at + 1, &["-n", "--interval", "-d"]);
                let script = words.get(from..).unwrap_or_default().join(" ");
                classify_source(&script, depth + 1, verdict);
                return None;
            }
            "busybox" | "toybox" => at + 1,
            "sudo" | "doas" | "pkexec" | "su" | "run0" => {
                verdict.destructive(format!("{program} runs a command as root"));
                skip_options(
                    words,
                    at + 1,
                    &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"],
                )
            }
            "xargs" => {
                let from = skip_options(words, at + 1, XARGS_WITH_VALUE);
                if from >= words.len() {
                    return None; // `xargs` alone runs `echo`.
                }
                from
            }
            _ => break,
        };
        if next <= at {
            break;
        }
        at = next;
    }
    Some(at)
}

/// `xargs` options that take a value.
const XARGS_WITH_VALUE: &[&str] = &[
    "-I",
    "-n",
    "-P",
    "-L",
    "-l",
    "-s",
    "-d",
    "-E",
    "-e",
    "-a",
    "--max-args",
];

/// `env [options] [NAME=value...] command` at `words[at]`: the index of the command, or
/// `None` when `-S` gave it a script, judged here. `-C` runs the command elsewhere.
fn skip_env(words: &[String], at: usize, depth: usize, verdict: &mut Verdict) -> Option<usize> {
    let mut i = at + 1;
    while let Some(word) = words.get(i) {
        if let Some(split) = word
            .strip_prefix("--split-string=")
            .or_else(|| (word == "-S" || word == "--split-string").then_some(""))
        {
            let script = if split.is_empty() {
                words[i + 1..].join(" ")
            } else {
                words[i..].join(" ")
            };
            let script = script.strip_prefix("--split-string=").unwrap_or(&script);
            classify_source(script, depth + 1, verdict);
            return None;
        }
        if is_assignment(word) {
            i += 1;
        } else if ["-C", "--chdir"].contains(&word.as_str()) || word.starts_with("--chdir=") {
            verdict.lose_dir();
            i += 1 + usize::from(!word.contains('='));
        } else if ["-u", "--unset"].contains(&word.as_str()) {
            i += 2;
        } else if word.starts_with('-') {
            i += 1;
        } else {
            break;
        }
    }
    Some(i)
}

/// Whether a command word is the result of an expansion (`$X`, `${X}`, `$(...)`, backticks,
/// a glob): what runs is only known when the shell runs it. A variable in the directory only
/// (`$HOME/bin/tool`) leaves the program's name as written, which is judged.
fn is_computed(word: &str) -> bool {
    word.contains("$(") || word.contains('`') || basename(word).contains(['$', '*', '?', '{', '}'])
}

// ---------------------------------------------------------------------------------------------
// Programs

/// Programs that only read (or only print), whatever their arguments.
const READ_ONLY: &str = "ls ll la dir cat bat head tail wc grep egrep fgrep rg ag ack pwd echo printf which \
     whereis type file stat du df tree true false test [ [[ (( basename dirname realpath \
     readlink whoami id groups uname printenv cut tr diff cmp comm jq nl od hexdump strings \
     md5sum sha1sum sha224sum sha256sum sha384sum sha512sum b2sum cksum seq sleep ps free \
     uptime tac rev column fold expand unexpand paste join fmt less more man lsof pgrep nproc \
     locale getconf cd pushd popd dirs export set unset shift read exit return break continue \
     : wait jobs alias hash declare local readonly typeset for select case lscpu lsblk env \
     tty yes look numfmt cal ldd nm objdump readelf size zcat bzcat xzcat zgrep";

/// Whether `word` is one of the space-separated words of `list`.
fn listed(list: &str, word: &str) -> bool {
    list.split_ascii_whitespace().any(|item| item == word)
}

fn has_downloader(text: &str) -> bool {
    text.split(|c: char| c.is_whitespace() || "()`|;&$\"'".contains(c))
        .any(|word| listed(interp::DOWNLOADERS, basename(word)))
}

fn classify_program(
    program: &str,
    args: &[String],
    piped_from: Option<&[String]>,
    depth: usize,
    verdict: &mut Verdict,
) {
    if let [only] = args
        && ["--version", "--help", "-V"].contains(&only.as_str())
        && !program.starts_with('$')
    {
        return;
    }
    match program {
        _ if listed(READ_ONLY, program) => {}
        "rm" => classify_rm(args, verdict),
        "unlink" => verdict.destructive("unlink deletes a file for good"),
        "rmdir" => verdict.destructive("rmdir deletes directories"),
        "find" => classify_find(args, depth, verdict),
        "git" => git::classify_git(args, verdict),
        "cargo" => classify_cargo(args, verdict),
        "chmod" | "chown" | "chgrp" | "chattr" | "setfacl" => {
            if has_short(args, 'R') || has_long(args, "--recursive") {
                verdict.destructive(format!("{program} -R changes permissions recursively"));
            } else {
                verdict.mutating();
            }
        }
        "dd" => {
            if let Some(target) = args.iter().find_map(|arg| arg.strip_prefix("of=")) {
                verdict.destructive(format!("dd of={target} overwrites it with raw bytes"));
            } else {
                verdict.mutating();
            }
        }
        "mkswap" | "wipefs" | "fdisk" | "sfdisk" | "cfdisk" | "gdisk" | "sgdisk" | "parted"
        | "mke2fs" | "blkdiscard" => {
            verdict.destructive(format!("{program} rewrites a disk, erasing its data"));
        }
        _ if program.starts_with("mkfs") => {
            verdict.destructive(format!("{program} formats a file system, erasing its data"));
        }
        "truncate" => verdict.destructive("truncate cuts files down, losing their contents"),
        "shred" => verdict.destructive("shred overwrites files so they cannot be recovered"),
        "reboot" | "shutdown" | "halt" | "poweroff" => {
            verdict.destructive(format!("{program} stops or restarts the machine"));
        }
        "kill" if args.iter().any(|arg| arg == "-1") => {
            verdict.destructive("kill -1 signals every process you may signal");
        }
        "crontab" if has_short(args, 'r') => {
            verdict.destructive("crontab -r deletes the crontab");
        }
        "rsync" if args.iter().any(|arg| arg.starts_with("--delete")) => {
            verdict.destructive("rsync --delete deletes files at the destination");
        }
        "mv" if positionals(args)
            .last()
            .is_some_and(|dest| dest == "/dev/null") =>
        {
            verdict.destructive("mv to /dev/null deletes the file");
        }
        "mv" | "cp" | "ln" | "install" => files::classify_copy(program, args, verdict),
        "sed" => {
            if has_short(args, 'i') || has_long(args, "--in-place") {
                verdict.destructive("sed -i edits files in place, replacing what they held");
            }
        }
        "awk" | "gawk" | "mawk" | "nawk" => classify_awk(program, args, verdict),
        "sort" => classify_sort(args, verdict),
        "uniq" | "xxd" => {
            if positionals(args).count() >= 2 {
                verdict.mutating();
            }
        }
        "tee" => files::classify_tee(args, verdict),
        "date" => {
            if has_short(args, 's') || has_long(args, "--set") {
                verdict.mutating();
            }
        }
        "hostname" => {
            if positionals(args).next().is_some() {
                verdict.mutating();
            }
        }
        "eval" => classify_source(&args.join(" "), depth + 1, verdict),
        "source" | "." => {
            if args.iter().any(|arg| has_downloader(arg)) {
                verdict.destructive(format!(
                    "{program} runs a script downloaded from the network"
                ));
            }
            verdict.mutating();
        }
        _ if interp::is_interpreter(program) => {
            interp::classify_interpreter(program, args, piped_from, depth, verdict);
        }
        "go" | "npm" | "pnpm" | "yarn" | "pip" | "pip3" | "rustc" | "rustup" => {
            classify_toolchain(program, args, verdict);
        }
        _ => verdict.mutating(),
    }
}

/// `rm`: always destructive (there is no trash), the reason naming `-r` and `-f`.
fn classify_rm(args: &[String], verdict: &mut Verdict) {
    let recursive = has_short(args, 'r') || has_short(args, 'R') || has_long(args, "--recursive");
    let force = has_short(args, 'f') || has_long(args, "--force");
    match (recursive, force) {
        (true, true) => verdict.destructive("rm -rf deletes files recursively"),
        (true, false) => verdict.destructive("rm -r deletes files recursively"),
        (false, true) => verdict.destructive("rm -f deletes files without asking"),
        (false, false) => {
            verdict.destructive("rm deletes files for good (there is no trash)");
        }
    }
}

/// `awk` and its kin: `-i inplace` edits files in place; a program that runs commands or
/// prints to a file or a pipe mutates.
fn classify_awk(program: &str, args: &[String], verdict: &mut Verdict) {
    let writes = args.iter().any(|arg| {
        arg.contains("system")
            || arg.contains("| \"")
            || arg.contains("|&")
            || arg.contains("> \"")
            || arg.contains(">\"")
            || arg.contains("print >")
            || arg.contains("printf >")
    });
    if args.iter().any(|arg| arg == "inplace") {
        verdict.destructive(format!("{program} -i inplace edits files in place"));
    } else if writes {
        verdict.mutating();
    }
}

/// `sort -o FILE` (`-oFILE`, `--output=FILE`) writes FILE.
fn classify_sort(args: &[String], verdict: &mut Verdict) {
    if let Some(i) = args.iter().position(|arg| arg == "-o") {
        let target = args.get(i + 1).map_or("", String::as_str);
        files::check_write("sort -o", target, true, verdict);
    } else if let Some(target) = args.iter().find_map(|arg| {
        arg.strip_prefix("--output=")
            .or_else(|| arg.strip_prefix("-o"))
            .filter(|target| !target.is_empty())
    }) {
        files::check_write("sort -o", target, true, verdict);
    }
}

/// A language toolchain (`go`, `npm`, `pip`, `rustup`, ...): read-only for the subcommands
/// that only look, mutating otherwise.
fn classify_toolchain(program: &str, args: &[String], verdict: &mut Verdict) {
    match program {
        "go" => classify_subcommand(
            args,
            &["version", "env", "list", "vet", "doc", "build", "test"],
            verdict,
            |args| args.iter().any(|arg| arg == "-w" || arg == "-u"),
        ),
        "npm" | "pnpm" | "yarn" => classify_subcommand(
            args,
            &[
                "ls", "list", "view", "info", "outdated", "why", "explain", "search",
            ],
            verdict,
            |_| false,
        ),
        "pip" | "pip3" => classify_subcommand(
            args,
            &["list", "show", "freeze", "check", "search"],
            verdict,
            |_| false,
        ),
        "rustc" | "rustup" => classify_subcommand(
            args,
            &["show", "which", "--print", "--version", "-vV"],
            verdict,
            |_| false,
        ),
        _ => verdict.mutating(),
    }
}

/// Read-only when the first argument is one of `read_only` and `writes` finds nothing.
fn classify_subcommand(
    args: &[String],
    read_only: &[&str],
    verdict: &mut Verdict,
    writes: impl Fn(&[String]) -> bool,
) {
    let read = args
        .first()
        .is_some_and(|sub| read_only.contains(&sub.as_str()));
    if !read || writes(&args[1..]) {
        verdict.mutating();
    }
}

fn classify_find(args: &[String], depth: usize, verdict: &mut Verdict) {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        match arg.as_str() {
            "-delete" => verdict.destructive("find -delete deletes the files it finds"),
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                let start = i + 1;
                let mut end = start;
                while args.get(end).is_some_and(|word| word != ";" && word != "+") {
                    end += 1;
                }
                // `{}` is each file found: any name, as a glob would be.
                let inner: Vec<String> = args[start..end.min(args.len())]
                    .iter()
                    .map(|word| {
                        if word == "{}" {
                            "*".to_owned()
                        } else {
                            word.clone()
                        }
                    })
                    .collect();
                classify_words(&inner, None, depth + 1, verdict);
                i = end;
            }
            "-fprint" | "-fprint0" | "-fprintf" | "-fls" => verdict.mutating(),
            _ => {}
        }
        i += 1;
    }
}

/// `cargo` subcommands that only read the sources (they may write build artefacts).
const CARGO_READ_ONLY: &str = "check c test t build b clippy doc d metadata tree bench search verify-project version \
     locate-project pkgid read-manifest nextest help";

fn classify_cargo(args: &[String], verdict: &mut Verdict) {
    let at = skip_options(
        args,
        usize::from(args.first().is_some_and(|arg| arg.starts_with('+'))),
        &["--color", "-Z", "--config", "-C", "--manifest-path"],
    );
    let Some(sub) = args.get(at) else {
        return;
    };
    let rest = &args[at + 1..];
    let read = match sub.as_str() {
        "fmt" => has_long(rest, "--check"),
        "clippy" => !has_long(rest, "--fix"),
        sub => listed(CARGO_READ_ONLY, sub),
    };
    if !read {
        verdict.mutating();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_of_several_parts_are_all_named() {
        let Effect::Destructive { reason } = classify("rm -rf a && git push --force") else {
            panic!("not destructive");
        };
        assert_eq!(
            reason,
            "rm -rf deletes files recursively; git push --force overwrites history on the remote"
        );
    }

    #[test]
    fn unterminated_input_does_not_hang_or_panic() {
        for command in [
            "echo 'abc",
            "echo \"abc",
            "echo $(ls",
            "echo `ls",
            "echo ${x",
            "cat <<EOF\nx",
        ] {
            let _ = classify(command);
        }
        assert_eq!(classify(""), Effect::ReadOnly);
    }

    #[test]
    fn deep_nesting_is_mutating_not_a_stack_overflow() {
        let mut command = "ls".to_owned();
        for _ in 0..40 {
            command = format!("echo $({command})");
        }
        assert_eq!(classify(&command), Effect::Mutating);
    }
}
