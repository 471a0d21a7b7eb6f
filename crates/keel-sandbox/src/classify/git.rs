//! `git`: which subcommands only read, and which discard work or rewrite history.

use super::{Presence, Verdict, has_long, has_short, listed, positionals};

/// `git` subcommands that only read.
const GIT_READ_ONLY: &str = "status log diff show blame annotate grep ls-files ls-tree ls-remote rev-parse rev-list \
     describe shortlog cat-file merge-base name-rev for-each-ref show-ref show-branch \
     count-objects version help whatchanged range-diff check-ignore check-attr var \
     verify-commit verify-tag fsck cherry diff-tree diff-files diff-index format-patch";

/// `git branch` options that only list.
const GIT_BRANCH_LIST: &str = "-a --all -r --remotes -v -vv --verbose --list -l --show-current --no-color --color \
     --column --no-column -i --ignore-case --omit-empty";

/// Configuration keys (lower case, last part) whose value is a command git runs.
const RUNS_COMMAND: &str = "fsmonitor sshcommand pager editor hookspath askpass gitproxy external program helper \
     textconv command driver clean smudge process uploadpack receivepack packobjectshook \
     alternaterefscommand";

pub(super) fn classify_git(args: &[String], verdict: &mut Verdict) {
    let at = global_options(args, verdict);
    let Some(sub) = args.get(at) else {
        return;
    };
    classify_subcommand(sub, &args[at + 1..], verdict);
}

/// git's options before the subcommand: a `-c` setting that runs a command is destructive;
/// `-C`, `--git-dir` and the like move git elsewhere. The index of the subcommand.
fn global_options(args: &[String], verdict: &mut Verdict) -> usize {
    let mut at = 0;
    while let Some(arg) = args.get(at) {
        match arg.as_str() {
            "-c" => {
                check_config(args.get(at + 1).map_or("", String::as_str), verdict);
                at += 2;
            }
            "-C" | "--git-dir" | "--work-tree" | "--namespace" => {
                verdict.lose_dir();
                at += 2;
            }
            _ if arg.starts_with("--config-env=") => {
                check_config(&arg["--config-env=".len()..], verdict);
                at += 1;
            }
            _ if arg.starts_with('-') => {
                if arg.starts_with("--git-dir=") || arg.starts_with("--work-tree=") {
                    verdict.lose_dir();
                }
                at += 1;
            }
            _ => break,
        }
    }
    at
}

/// `git <sub> <rest...>`: read-only, mutating, or destructive (with why).
fn classify_subcommand(sub: &str, rest: &[String], verdict: &mut Verdict) {
    let first = rest.first().map(String::as_str);
    match sub {
        sub if listed(GIT_READ_ONLY, sub) => {
            if sub == "format-patch" || has_long(rest, "--output") {
                verdict.mutating();
            }
        }
        "branch" => classify_branch(rest, verdict),
        "tag" => {
            if !tag_lists(rest) || has_short(rest, 'd') || has_long(rest, "--delete") {
                verdict.mutating();
            }
        }
        "remote" => {
            if !(rest.is_empty() || matches!(first, Some("-v" | "--verbose" | "show" | "get-url")))
            {
                verdict.mutating();
            }
        }
        "config" => {
            if !config_reads(rest) {
                verdict.mutating();
            }
        }
        "stash" => match first {
            Some("list" | "show") => {}
            Some("drop" | "clear") => {
                verdict.destructive("git stash drop/clear deletes stashed changes");
            }
            _ => verdict.mutating(),
        },
        "reflog" => match first {
            None | Some("show") => {}
            Some("expire" | "delete") => {
                verdict.destructive("git reflog expire/delete removes the history of refs");
            }
            _ => verdict.mutating(),
        },
        "worktree" | "notes" | "submodule" if matches!(first, Some("list" | "show" | "status")) => {
        }
        "push" => classify_push(rest, verdict),
        "reset" if has_long(rest, "--hard") => {
            verdict.destructive("git reset --hard discards uncommitted changes");
        }
        "clean" => {
            if has_short(rest, 'n') || has_long(rest, "--dry-run") {
                return;
            }
            verdict.destructive("git clean deletes untracked files");
        }
        "checkout" => classify_checkout(rest, verdict),
        "read-tree" => {
            if has_short(rest, 'u') || has_long(rest, "--reset") {
                verdict.destructive(
                    "git read-tree -u/--reset overwrites files in the work tree, discarding uncommitted changes",
                );
            } else {
                verdict.mutating();
            }
        }
        "checkout-index" => {
            if has_short(rest, 'f') || has_long(rest, "--force") {
                verdict.destructive(
                    "git checkout-index -f overwrites files in the work tree, discarding uncommitted changes",
                );
            } else {
                verdict.mutating();
            }
        }
        "restore" => {
            let staged_only = (has_short(rest, 'S') || has_long(rest, "--staged"))
                && !(has_short(rest, 'W') || has_long(rest, "--worktree"));
            if staged_only {
                verdict.mutating();
            } else {
                verdict.destructive("git restore discards uncommitted changes");
            }
        }
        "switch"
            if has_short(rest, 'f')
                || has_long(rest, "--force")
                || has_long(rest, "--discard-changes") =>
        {
            verdict.destructive("git switch --discard-changes discards uncommitted changes");
        }
        "filter-branch" | "filter-repo" => {
            verdict.destructive(format!("git {sub} rewrites the repository's history"));
        }
        "update-ref" if has_short(rest, 'd') => {
            verdict.destructive("git update-ref -d deletes a ref");
        }
        _ => verdict.mutating(),
    }
}

/// `git branch`: deleting an unmerged branch is destructive; anything but listing mutates.
fn classify_branch(rest: &[String], verdict: &mut Verdict) {
    let delete = has_short(rest, 'd') || has_long(rest, "--delete");
    let force = has_short(rest, 'f') || has_long(rest, "--force");
    if has_short(rest, 'D') || (delete && force) {
        verdict.destructive("git branch -D deletes a branch even if it is not merged");
    } else if !branch_lists(rest) {
        verdict.mutating();
    }
}

/// Whether `git tag <rest...>` lists tags (no operands, `-l`, or only listing options).
fn tag_lists(rest: &[String]) -> bool {
    rest.is_empty()
        || rest.iter().any(|arg| arg == "-l" || arg == "--list")
        || rest.iter().all(|arg| {
            arg.starts_with("-n")
                || arg.starts_with("--sort")
                || arg.starts_with("--contains")
                || arg.starts_with("--points-at")
        })
}

/// Whether `git config <rest...>` only reads: `--get*`, `--list`, `get`, `list`, or one key
/// without a value and no option that changes the file.
fn config_reads(rest: &[String]) -> bool {
    rest.iter().any(|arg| {
        arg.starts_with("--get") || arg == "--list" || arg == "-l" || arg == "get" || arg == "list"
    }) || (positionals(rest).count() == 1
        && !rest.iter().any(|arg| {
            arg.starts_with("--unset")
                || arg.starts_with("--add")
                || arg.starts_with("--remove")
                || arg.starts_with("--rename")
        }))
}

/// `git push`: mutating; forcing (overwriting history) or deleting remote branches is
/// destructive too.
fn classify_push(rest: &[String], verdict: &mut Verdict) {
    let force = has_short(rest, 'f')
        || has_long(rest, "--force")
        || has_long(rest, "--force-with-lease")
        || has_long(rest, "--force-if-includes")
        || has_long(rest, "--mirror")
        || positionals(rest).skip(1).any(|spec| spec.starts_with('+'));
    let delete = has_short(rest, 'd')
        || has_long(rest, "--delete")
        || has_long(rest, "--prune")
        || positionals(rest).skip(1).any(|spec| spec.starts_with(':'));
    if force {
        verdict.destructive("git push --force overwrites history on the remote");
    }
    if delete {
        verdict.destructive("git push --delete deletes branches on the remote");
    }
    verdict.mutating();
}

/// `git -c key=value`: an alias starting with `!` or a key whose value git runs as a command.
fn check_config(setting: &str, verdict: &mut Verdict) {
    let (key, value) = setting.split_once('=').unwrap_or((setting, ""));
    let lower = key.to_ascii_lowercase();
    let last = lower.rsplit('.').next().unwrap_or_default();
    if lower.starts_with("alias.") && value.trim_start().starts_with('!') {
        verdict.destructive(format!(
            "git -c {key}=!... makes git run a shell command keel cannot see"
        ));
    } else if listed(RUNS_COMMAND, last) || lower.starts_with("pager.") {
        verdict.destructive(format!(
            "git -c {key}=... makes git run a command keel cannot see"
        ));
    }
}

/// `git checkout`: switching branches keeps uncommitted changes (git refuses when they
/// conflict); checking out paths (`-- f`, `.`, `<rev> f`, `-f`) overwrites them.
fn classify_checkout(rest: &[String], verdict: &mut Verdict) {
    verdict.mutating();
    if has_short(rest, 'f') || has_long(rest, "--force") {
        verdict.destructive("git checkout -f discards uncommitted changes");
        return;
    }
    if has_long(rest, "--pathspec-from-file") || rest.iter().any(|arg| arg == "--" || arg == ".") {
        verdict.destructive("git checkout <paths> discards uncommitted changes to them");
        return;
    }
    // The operands, without the values of -b/-B/--orphan.
    let mut operands = Vec::new();
    let mut i = 0;
    while let Some(arg) = rest.get(i) {
        i += 1;
        match arg.as_str() {
            "-b" | "-B" | "--orphan" | "--conflict" => i += 1,
            _ if arg.starts_with('-') => {}
            _ => operands.push(arg),
        }
    }
    let creates = rest
        .iter()
        .any(|arg| ["-b", "-B", "--orphan"].contains(&arg.as_str()));
    match operands.as_slice() {
        [] => {}
        [_] if creates => {}
        // `git checkout f` checks out the file f when there is no branch f.
        [single] => {
            if verdict.presence(single) == Presence::Present {
                verdict.destructive(format!(
                    "git checkout {single} discards uncommitted changes to {single}"
                ));
            }
        }
        [_, ..] => {
            verdict.destructive("git checkout <rev> <paths> discards uncommitted changes to them");
        }
    }
}

fn branch_lists(args: &[String]) -> bool {
    let mut i = 0;
    let mut listing = false;
    while let Some(arg) = args.get(i) {
        let name = arg.split_once('=').map_or(arg.as_str(), |(name, _)| name);
        if [
            "--contains",
            "--no-contains",
            "--merged",
            "--no-merged",
            "--points-at",
        ]
        .contains(&name)
        {
            // Their commit argument is optional for `--merged`; a following name is a commit.
            i += 2;
            listing = true;
            continue;
        }
        if listed(GIT_BRANCH_LIST, name) || name == "--sort" || name == "--format" {
            listing |= name == "--list" || name == "-l";
            i += 1;
            continue;
        }
        // A pattern is a listing only after `--list`; otherwise it names a branch to create.
        if !listing {
            return false;
        }
        i += 1;
    }
    true
}
