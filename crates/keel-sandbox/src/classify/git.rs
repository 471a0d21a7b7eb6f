//! `git`: which subcommands only read, and which discard work or rewrite history.

use super::{Verdict, has_long, has_short, listed, positionals};

/// `git` subcommands that only read.
const GIT_READ_ONLY: &str = "status log diff show blame annotate grep ls-files ls-tree ls-remote rev-parse rev-list \
     describe shortlog cat-file merge-base name-rev for-each-ref show-ref show-branch \
     count-objects version help whatchanged range-diff check-ignore check-attr var \
     verify-commit verify-tag fsck cherry diff-tree diff-files diff-index format-patch";

/// `git branch` options that only list.
const GIT_BRANCH_LIST: &str = "-a --all -r --remotes -v -vv --verbose --list -l --show-current --no-color --color \
     --column --no-column -i --ignore-case --omit-empty";

pub(super) fn classify_git(args: &[String], verdict: &mut Verdict) {
    let mut at = 0;
    while let Some(arg) = args.get(at) {
        match arg.as_str() {
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" => at += 2,
            _ if arg.starts_with('-') => at += 1,
            _ => break,
        }
    }
    let Some(sub) = args.get(at) else {
        return;
    };
    let rest = &args[at + 1..];
    let first = rest.first().map(String::as_str);
    match sub.as_str() {
        sub if listed(GIT_READ_ONLY, sub) => {
            if sub == "format-patch" || has_long(rest, "--output") {
                verdict.mutating();
            }
        }
        "branch" => {
            let delete = has_short(rest, 'd') || has_long(rest, "--delete");
            let force = has_short(rest, 'f') || has_long(rest, "--force");
            if has_short(rest, 'D') || (delete && force) {
                verdict.destructive("git branch -D deletes a branch even if it is not merged");
            } else if !branch_lists(rest) {
                verdict.mutating();
            }
        }
        "tag" => {
            let lists = rest.is_empty()
                || rest.iter().any(|arg| arg == "-l" || arg == "--list")
                || rest.iter().all(|arg| {
                    arg.starts_with("-n")
                        || arg.starts_with("--sort")
                        || arg.starts_with("--contains")
                        || arg.starts_with("--points-at")
                });
            if !lists || has_short(rest, 'd') || has_long(rest, "--delete") {
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
            let reads = rest.iter().any(|arg| {
                arg.starts_with("--get")
                    || arg == "--list"
                    || arg == "-l"
                    || arg == "get"
                    || arg == "list"
            }) || (positionals(rest).count() == 1
                && !rest.iter().any(|arg| {
                    arg.starts_with("--unset")
                        || arg.starts_with("--add")
                        || arg.starts_with("--remove")
                        || arg.starts_with("--rename")
                }));
            if !reads {
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
        "push" => {
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
        "reset" if has_long(rest, "--hard") => {
            verdict.destructive("git reset --hard discards uncommitted changes");
        }
        "clean" => {
            if has_short(rest, 'n') || has_long(rest, "--dry-run") {
                return;
            }
            verdict.destructive("git clean deletes untracked files");
        }
        "checkout" => {
            let discards = has_short(rest, 'f')
                || has_long(rest, "--force")
                || rest.iter().any(|arg| arg == "--" || arg == ".");
            if discards {
                verdict.destructive("git checkout -- <paths> discards uncommitted changes");
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
