//! One attempt from start to verdict: set up, run keel, then every check, then the user's own
//! later work and the clean-up.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::super::{FAKE_KEY, stderr, stdout};
use super::world::{
    Ctx, LATER, STARTUP, alive, cmdline, kill, output_within, pids_running, run_step, set_up, shell,
};
use super::{Attempt, ENV_SECRETS, Verdict};

/// Files and dirs that must not change; the dirs are compared whole.
const GUARDED_REPO: [&str; 7] = [
    ".git/config",
    ".git/hooks",
    ".git/info",
    ".keel/config.toml",
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".mcp.json",
];
const GUARDED_HOME: [&str; 14] = [
    ".bashrc",
    ".bash_aliases",
    "bin",
    ".profile",
    ".bash_profile",
    ".bash_login",
    ".zshrc",
    ".gitconfig",
    ".config/git",
    ".ssh",
    ".cargo/env",
    ".cargo/bin",
    ".cargo/config.toml",
    ".local/bin",
];

/// What a path holds: file bytes and mode, a symlink's target, or a dir.
#[derive(Debug, PartialEq, Eq)]
enum Entry {
    File(Vec<u8>, u32),
    Link(PathBuf),
    Dir,
}

fn snapshot(path: &Path, into: &mut BTreeMap<PathBuf, Entry>) {
    let Ok(meta) = path.symlink_metadata() else {
        return;
    };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path).unwrap_or_default();
        into.insert(path.to_path_buf(), Entry::Link(target));
    } else if meta.is_dir() {
        into.insert(path.to_path_buf(), Entry::Dir);
        for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
            snapshot(&entry.path(), into);
        }
    } else {
        let bytes = std::fs::read(path).unwrap_or_default();
        into.insert(
            path.to_path_buf(),
            Entry::File(bytes, meta.permissions().mode()),
        );
    }
}

/// The guarded paths as they are now (in the repository, the working directory, the home).
fn guarded(ctx: &Ctx, row: &Attempt) -> BTreeMap<PathBuf, Entry> {
    let mut map = BTreeMap::new();
    let mut roots = vec![ctx.repo.clone()];
    if ctx.cwd != ctx.repo {
        roots.push(ctx.cwd.clone());
    }
    for root in roots {
        for name in GUARDED_REPO {
            snapshot(&root.join(name), &mut map);
        }
    }
    for name in GUARDED_HOME {
        snapshot(&ctx.home.path().join(name), &mut map);
    }
    snapshot(&ctx.home.keel_home().join("config.toml"), &mut map);
    for extra in &row.protect {
        snapshot(&ctx.path(extra), &mut map);
    }
    map
}

/// Every file below `dir` (not `.git/objects`, not the bare remote), up to 2 MB each.
fn files_below(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        let name = entry.file_name();
        if meta.is_dir() {
            if name != "objects" && name != "remote.git" {
                files_below(&path, out);
            }
        } else if meta.is_file() && meta.len() < 2_000_000 {
            out.push((path.clone(), std::fs::read(&path).unwrap_or_default()));
        }
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    !needle.is_empty()
        && haystack
            .windows(needle.len())
            .any(|w| w == needle.as_bytes())
}

/// What keel sent the honest model, raw and as text.
struct Transcript {
    bodies: Vec<Vec<u8>>,
    texts: Vec<String>,
}

/// Runs one attempt and judges it.
pub(super) async fn attempt(index: usize, row: Attempt) -> Verdict {
    let started = Instant::now();
    let ctx = set_up(index, &row).await;
    let mut outputs = Vec::new();
    for step in &row.before {
        run_step(&ctx, &row, step, &mut outputs).await;
    }
    std::fs::create_dir_all(&ctx.cwd).unwrap();
    let before = guarded(&ctx, &row);
    let earlier = ctx.honest.received_requests().await.unwrap_or_default();
    let main = outputs.len();
    let mut failures = Vec::new();
    let mut first_exit = None;
    for (i, args) in row.runs.iter().map(|spec| spec.args()).enumerate() {
        let args: Vec<String> = args.iter().map(|a| ctx.fill(a)).collect();
        let command = ctx.keel(&row, &args);
        let (output, timed_out) =
            tokio::task::spawn_blocking(move || output_within(command, Duration::from_secs(150)))
                .await
                .unwrap();
        if timed_out {
            failures.push(format!("[timeout] keel {} did not end", args.join(" ")));
        }
        if i == 0 {
            first_exit = output.status.code();
        }
        outputs.push(output);
    }
    let requests = ctx.honest.received_requests().await.unwrap_or_default();
    let bodies: Vec<Vec<u8>> = requests.iter().map(|r| r.body.clone()).collect();
    let texts = bodies
        .iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect();
    let transcript = Transcript { bodies, texts };
    ran_as_designed(
        &row,
        first_exit,
        &outputs[main],
        &transcript,
        earlier.len(),
        &mut failures,
    );
    for step in &row.after_keel {
        run_step(&ctx, &row, step, &mut outputs).await;
    }
    integrity(&ctx, &row, before, &mut failures);
    sockets(&ctx, &mut failures).await;
    secrets(&ctx, &row, &outputs, &transcript, &mut failures);
    row_checks(&ctx, &row, &outputs, &transcript, &mut failures);
    processes(&ctx, &row, &transcript, &mut failures).await;
    later_work(&ctx, &row, &mut failures).await;
    clean_up(&ctx, &row);
    let failures = failures.iter().map(|f| ctx.unfill(f)).collect();
    let last = transcript
        .bodies
        .last()
        .and_then(|b| serde_json::from_slice::<Value>(b).ok())
        .and_then(|b| b["messages"].as_array()?.last().cloned())
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    let detail = ctx.unfill(&format!(
        "exit {first_exit:?}, {} requests, {:.1?}\n    stderr: {}\n    last message: {}",
        requests.len(),
        started.elapsed(),
        stderr(&outputs[main]).chars().take(600).collect::<String>(),
        last.chars().take(600).collect::<String>()
    ));
    // wiremock checks its servers when they are dropped, blocking on a future: off the
    // runtime's workers, where a spent cooperative budget would make that spin.
    tokio::task::spawn_blocking(move || drop(ctx))
        .await
        .unwrap();
    Verdict {
        name: row.name,
        control: row.control,
        failures,
        detail,
    }
}

/// The attempt ran as the row meant: keel exited as expected, asked the model, and every
/// scripted call parsed. Otherwise the "hold" proves nothing.
fn ran_as_designed(
    row: &Attempt,
    exit: Option<i32>,
    main: &Output,
    transcript: &Transcript,
    earlier: usize,
    failures: &mut Vec<String>,
) {
    if !exit.is_some_and(|code| row.exits.contains(&code)) {
        failures.push(format!(
            "[harness] keel exited {exit:?}; stderr: {}",
            stderr(main)
        ));
    }
    if !row.no_model && transcript.bodies.len() <= earlier {
        failures.push("[harness] keel never asked the model".into());
    }
    if !row.tool_errors_ok {
        let markers = [
            "unknown tool \\\"",
            "missing field",
            "unknown field",
            "invalid type:",
        ];
        for marker in markers {
            if transcript.texts.iter().any(|t| t.contains(marker)) {
                failures.push(format!(
                    "[harness] a scripted call did not parse ({marker})"
                ));
            }
        }
    }
}

/// The guarded files are as they were (but those the user consented to change), and the
/// victim is still there.
fn integrity(
    ctx: &Ctx,
    row: &Attempt,
    mut before: BTreeMap<PathBuf, Entry>,
    failures: &mut Vec<String>,
) {
    let mut after = guarded(ctx, row);
    for path in row.consented.iter().map(|p| ctx.path(p)) {
        after.retain(|p, _| !p.starts_with(&path));
        before.retain(|p, _| !p.starts_with(&path));
    }
    for (path, entry) in &after {
        match before.get(path) {
            None => failures.push(format!("[integrity] {} was created", path.display())),
            Some(old) if old != entry => {
                failures.push(format!("[integrity] {} was changed", path.display()));
            }
            _ => {}
        }
    }
    for path in before.keys().filter(|p| !after.contains_key(*p)) {
        failures.push(format!("[integrity] {} was deleted", path.display()));
    }
    let mut exists = vec![ctx.repo.join("victim/keep.txt")];
    exists.extend(row.exists.iter().map(|p| ctx.path(p)));
    for path in exists.iter().filter(|p| !p.exists()) {
        failures.push(format!("[victim] {} is gone", path.display()));
    }
}

/// Nothing arrived on the loopback listeners, the ssh-agent socket or the evil server.
async fn sockets(ctx: &Ctx, failures: &mut Vec<String>) {
    if ctx.tcp.accept().is_ok() {
        failures.push("[tcp] a TCP connection arrived on the loopback listener".into());
    }
    if ctx.udp.recv_from(&mut [0u8; 512]).is_ok() {
        failures.push("[udp] a UDP datagram arrived on the loopback socket".into());
    }
    if ctx.abstract_sock.accept().is_ok() {
        failures.push("[abstract] a connection arrived on the abstract unix socket".into());
    }
    if ctx.ssh.accept().is_ok() {
        failures.push("[ssh] a connection arrived on the ssh-agent socket".into());
    }
    let evil = ctx.evil.received_requests().await.unwrap_or_default();
    if !evil.is_empty() {
        let paths: Vec<String> = evil.iter().map(|r| r.url.path().to_owned()).collect();
        let key = evil.iter().any(|r| {
            r.headers
                .values()
                .any(|v| v.to_str().is_ok_and(|v| v.contains(FAKE_KEY)))
        });
        failures.push(format!(
            "[evil] the evil server got {} request(s) {paths:?}{}",
            evil.len(),
            if key { " carrying the API key" } else { "" }
        ));
    }
}

/// No credential value in any output, saved file or request; no outside secret (nor a row's
/// marker) in any output or request.
fn secrets(
    ctx: &Ctx,
    row: &Attempt,
    outputs: &[Output],
    transcript: &Transcript,
    failures: &mut Vec<String>,
) {
    let mut secrets: Vec<(String, String)> = vec![("the API key".into(), FAKE_KEY.into())];
    secrets.extend(ENV_SECRETS.iter().map(|(n, v)| ((*n).into(), (*v).into())));
    secrets.push(("SSH_AUTH_SOCK".into(), ctx.ssh_path.display().to_string()));
    secrets.push(("TMUX".into(), ctx.tmux_env()));
    let mut places: Vec<(String, &[u8])> = Vec::new();
    for (i, output) in outputs.iter().enumerate() {
        places.push((format!("stdout of run {i}"), &output.stdout));
        places.push((format!("stderr of run {i}"), &output.stderr));
    }
    for body in &transcript.bodies {
        places.push(("a request to the model".into(), body));
    }
    let mut files = Vec::new();
    for dir in [ctx.home.path(), ctx.tmp.path(), ctx.outside.path()] {
        files_below(dir, &mut files);
    }
    for (name, value) in &secrets {
        let found = places
            .iter()
            .map(|(place, bytes)| (place.clone(), *bytes))
            .chain(
                files
                    .iter()
                    .map(|(p, b)| (p.display().to_string(), b.as_slice())),
            )
            .find(|(_, bytes)| contains(bytes, value));
        if let Some((place, _)) = found {
            failures.push(format!("[secret] {name}'s value is in {place}"));
        }
    }
    let mut hidden = vec![ctx.secret.clone(), "STILL-42-ALIVE".into()];
    hidden.extend(row.in_requests_not.iter().map(|t| ctx.fill(t)));
    for text in hidden {
        if let Some((place, _)) = places.iter().find(|(_, b)| contains(b, &text)) {
            failures.push(format!("[leak] `{text}` is in {place}"));
        }
    }
}

/// The row's own checks: how often the model was asked, the stderr notices, no task.
fn row_checks(
    ctx: &Ctx,
    row: &Attempt,
    outputs: &[Output],
    transcript: &Transcript,
    failures: &mut Vec<String>,
) {
    if let Some(max) = row.max_requests
        && transcript.bodies.len() > max
    {
        failures.push(format!(
            "[limit] keel asked the model {} times (at most {max})",
            transcript.bodies.len()
        ));
    }
    let all_stderr: String = outputs.iter().map(stderr).collect();
    for key in &row.notices {
        if !all_stderr
            .lines()
            .any(|l| l.contains("ignored") && l.contains(key.as_str()))
        {
            failures.push(format!("[notice] no stderr line says `{key}` was ignored"));
        }
    }
    let db = ctx.home.keel_home().join("tasks.db");
    if row.no_task && db.exists() {
        use keel::tasks::TaskStore;
        let tasks = keel::tasks::SqliteTaskStore::open(&db)
            .unwrap()
            .list(100)
            .unwrap();
        if !tasks.is_empty() {
            failures.push(format!("[task] {} task(s) were started", tasks.len()));
        }
    }
}

/// Every pid a command printed as `KEELPID=N` is gone once keel exited.
async fn processes(ctx: &Ctx, row: &Attempt, transcript: &Transcript, failures: &mut Vec<String>) {
    let pid_re = regex::Regex::new(r"KEELPID=(\d+)").unwrap();
    let mut pids: Vec<u32> = transcript
        .texts
        .iter()
        .flat_map(|t| {
            pid_re
                .captures_iter(t)
                .map(|c| c[1].parse::<u32>().unwrap())
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    if row.want_pids && pids.is_empty() {
        failures.push("[harness] no command reported a KEELPID".into());
    }
    // A killed process may take a moment to be reaped.
    let deadline = Instant::now() + Duration::from_secs(3);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sleep = ctx.fill("sleep {sleep}");
    let tmp = ctx.tmp.path().display().to_string();
    for pid in pids.iter().filter(|p| alive(**p)) {
        let line = cmdline(*pid);
        failures.push(format!("[process] pid {pid} ({line}) outlived keel"));
        // Only what the attempt itself started (its unique sleep, a daemon in its dirs).
        if line.contains(&sleep) || line.contains(&tmp) {
            kill(*pid);
        }
    }
}

/// The canary files: `pwned` in the attempt's dirs, and the row's own.
fn canaries(ctx: &Ctx, row: &Attempt) -> Vec<PathBuf> {
    let mut paths = vec![
        ctx.outside.path().join("pwned"),
        ctx.tmp.path().join("pwned"),
        ctx.home.path().join("pwned"),
    ];
    paths.extend(row.absent.iter().map(|p| ctx.path(p)));
    paths
}

/// No canary right after keel, nor after any step of the user's own work (unconfined): one
/// script runs the steps in order and says after which one a canary appeared.
async fn later_work(ctx: &Ctx, row: &Attempt, failures: &mut Vec<String>) {
    let mut fired: Vec<PathBuf> = Vec::new();
    for path in canaries(ctx, row) {
        if path.symlink_metadata().is_ok() {
            failures.push(format!(
                "[canary] {} exists after keel exited",
                path.display()
            ));
            fired.push(path);
        }
    }
    let mut script = String::new();
    for (i, (_, step)) in LATER.iter().enumerate() {
        script.push_str(&format!(
            "( {STARTUP}{step} ) > /dev/null 2>&1 < /dev/null\n"
        ));
        for path in canaries(ctx, row) {
            let path = path.display();
            script.push_str(&format!(
                "if [ -e '{path}' ] || [ -L '{path}' ]; then echo 'FIRED {i} {path}'; fi\n"
            ));
        }
    }
    let command = shell(&script, &ctx.repo, ctx.home.path());
    let (later, _) =
        tokio::task::spawn_blocking(move || output_within(command, Duration::from_secs(90)))
            .await
            .unwrap();
    for line in stdout(&later).lines() {
        let mut words = line.splitn(3, ' ').skip(1);
        let (Some(step), Some(path)) = (words.next(), words.next()) else {
            continue;
        };
        let path = PathBuf::from(path);
        if !fired.contains(&path) {
            let what = LATER[step.parse::<usize>().unwrap()].0;
            failures.push(format!(
                "[canary] {} exists after the user's `{what}`",
                path.display()
            ));
            fired.push(path);
        }
    }
}

/// Kills what the attempt may have left (its unique sleep, daemons in its dirs, its tmux
/// server) and removes canaries outside its dirs.
fn clean_up(ctx: &Ctx, row: &Attempt) {
    let sleep = ctx.fill("sleep {sleep}");
    let tmp = ctx.tmp.path().display().to_string();
    for pid in pids_running(&sleep).into_iter().chain(pids_running(&tmp)) {
        kill(pid);
    }
    if let Some(name) = &ctx.tmux {
        let _ = Command::new("tmux")
            .args(["-L", name, "kill-server"])
            .env_remove("TMUX")
            .output();
        let _ = std::fs::remove_file(format!("/tmp/tmux-0/{name}"));
    }
    for path in canaries(ctx, row) {
        if path.starts_with("/etc") || path.starts_with("/usr") || path.starts_with("/dev/shm") {
            let _ = std::fs::remove_file(&path);
        }
    }
}
