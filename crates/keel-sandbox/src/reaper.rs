//! No process outlives its call: keel as a child subreaper, and the sweep of what commands
//! leave behind.
//!
//! A process that double-forks or calls `setsid` leaves its command's process group; its
//! parent exits and it is re-parented — to init, or, once [`become_subreaper`] was called,
//! to keel itself. So a host that calls [`become_subreaper`] (the `keel` binary does, first
//! thing) gets every escapee of its commands as a direct child, where `run_command` finds and
//! kills it at the end of each call, with its descendants, and reaps it.
//!
//! What the sweep must spare is registered: a [`Tracked`] guard (from [`spawn`],
//! [`spawn_std`], or [`Tracked::new`] right after a spawn) marks a child the host started on
//! purpose — a hook, a task supervisor, an MCP server — until it is dropped.
//! [`Tracked::surviving`] also spares the process (and its descendants) from
//! [`kill_descendants`], which a host calls on exit: for detached task supervisors.
//!
//! The sweep's rules: it runs when a `run_command` call ends (exit, timeout, cancel, drop)
//! and no other call is running (read-only calls run in parallel; the last one to end
//! sweeps); it takes direct children of this process that are not registered, not a running
//! command's `bash`, and started since the first of those calls began; it kills them and
//! their descendants through pidfds (so a recycled pid is never hit), and reaps only those
//! it killed (through the same pidfds), never a pid it does not own: tokio reaps its own
//! children.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::OwnedFd;
use std::sync::{Mutex, MutexGuard, OnceLock};

use rustix::process::{Pid, PidfdFlags, Signal, WaitId, WaitIdOptions};

/// The registry: pids to spare, running commands, pidfds of killed processes to reap.
#[derive(Debug, Default)]
struct State {
    /// Registered pids, and whether each also survives [`kill_descendants`]; a count per pid,
    /// in case guards overlap.
    tracked: HashMap<u32, (usize, bool)>,
    /// Running command calls.
    calls: usize,
    /// The `bash` of each running command call.
    shells: HashSet<u32>,
    /// The start time (clock ticks since boot) of the first command call since the last
    /// sweep: children started before it are not the calls' escapees.
    window: Option<u64>,
    /// Processes killed but not yet reaped.
    unreaped: Vec<OwnedFd>,
}

fn state() -> MutexGuard<'static, State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Makes this process a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`): orphaned
/// descendants are re-parented to it instead of init, so they can be found and killed.
pub fn become_subreaper() -> io::Result<()> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).map_err(Into::into)
}

/// Whether this process is a child subreaper.
pub fn is_subreaper() -> bool {
    rustix::process::child_subreaper().ok().flatten().is_some()
}

/// A child the host started on purpose, spared by the sweep (and, if
/// [`surviving`](Self::surviving), by [`kill_descendants`]) until this guard is dropped.
#[derive(Debug)]
#[must_use = "the process is unregistered when the guard is dropped"]
pub struct Tracked {
    pid: u32,
}

impl Tracked {
    /// Registers `pid`: the sweep after a command spares it and its descendants.
    pub fn new(pid: u32) -> Self {
        Self::register(&mut state(), pid, false)
    }

    /// Registers `pid` as surviving keel's exit: [`kill_descendants`] spares it and its
    /// descendants too (a detached task supervisor).
    pub fn surviving(pid: u32) -> Self {
        Self::register(&mut state(), pid, true)
    }

    fn register(state: &mut State, pid: u32, survives: bool) -> Self {
        let entry = state.tracked.entry(pid).or_insert((0, false));
        entry.0 += 1;
        entry.1 |= survives;
        Self { pid }
    }

    /// The registered pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let mut state = state();
        if let Some(entry) = state.tracked.get_mut(&self.pid) {
            entry.0 = entry.0.saturating_sub(1);
            if entry.0 == 0 {
                state.tracked.remove(&self.pid);
            }
        }
    }
}

/// Spawns `command` and registers the child in one step, so no sweep can fall between the
/// two.
pub fn spawn(
    command: &mut tokio::process::Command,
) -> io::Result<(tokio::process::Child, Tracked)> {
    let mut state = state();
    let child = command.spawn()?;
    let pid = child
        .id()
        .ok_or_else(|| io::Error::other("the child exited before it could be registered"))?;
    Ok((child, Tracked::register(&mut state, pid, false)))
}

/// Spawns `command` (a `std` one) and registers the child in one step; `surviving` as in
/// [`Tracked::surviving`].
pub fn spawn_std(
    command: &mut std::process::Command,
    surviving: bool,
) -> io::Result<(std::process::Child, Tracked)> {
    let mut state = state();
    let child = command.spawn()?;
    let pid = child.id();
    Ok((child, Tracked::register(&mut state, pid, surviving)))
}

/// Kills every descendant of this process except the registered surviving ones and their
/// descendants: for a host's exit. Returns how many were signalled. Reaps nothing (the
/// process is ending).
pub fn kill_descendants() -> usize {
    let state = state();
    let spared: HashSet<u32> = state
        .tracked
        .iter()
        .filter(|(_, (_, survives))| *survives)
        .map(|(pid, _)| *pid)
        .collect();
    drop(state);
    let own = std::process::id();
    let mut targets = Vec::new();
    let mut stack = children(own);
    while let Some(pid) = stack.pop() {
        if spared.contains(&pid) {
            continue;
        }
        targets.push(pid);
        stack.extend(children(pid));
    }
    kill_all(&targets).len()
}

/// A running `run_command` call, counted from before its `bash` is spawned until it ends.
#[derive(Debug)]
pub(crate) struct Call {
    shell: Option<u32>,
    pgid: Option<u32>,
    done: bool,
}

impl Call {
    /// Counts a call as running (before its spawn, so no sweep can take its `bash`).
    pub(crate) fn begin() -> Self {
        state().calls += 1;
        Self {
            shell: None,
            pgid: None,
            done: false,
        }
    }

    /// Records the call's `bash` (also its process group).
    pub(crate) fn started(&mut self, pid: u32) {
        let mut state = state();
        state.shells.insert(pid);
        if state.window.is_none() {
            state.window = start_time(pid);
        }
        self.shell = Some(pid);
        self.pgid = Some(pid);
    }

    /// Ends the call: kills and reaps what it left among this process's children (members of
    /// its process group re-parented here) and, if it is the last call running, sweeps.
    /// Returns the pidfds of the processes it killed that are not reaped yet.
    pub(crate) fn finish(&mut self) -> Vec<OwnedFd> {
        if self.done {
            return Vec::new();
        }
        self.done = true;
        let mut state = state();
        state.calls = state.calls.saturating_sub(1);
        if let Some(shell) = self.shell {
            state.shells.remove(&shell);
        }
        let sweep = state.calls == 0 && is_subreaper();
        let window = if state.calls == 0 {
            state.window.take()
        } else {
            None
        };
        let mut targets = Vec::new();
        let mut zombies = Vec::new();
        for pid in children(std::process::id()) {
            if state.tracked.contains_key(&pid) || state.shells.contains(&pid) {
                continue;
            }
            if Some(pid) == self.shell {
                // tokio's child: it reaps it.
                continue;
            }
            let Some(info) = stat(pid) else { continue };
            let ours = self.pgid.is_some_and(|pgid| info.pgrp == pgid);
            let escaped = sweep && window.is_some_and(|since| info.start >= since);
            if (ours || escaped) && info.zombie {
                // Dead already (killed with the group): only to reap.
                zombies.push(pid);
            } else if ours || escaped {
                targets.push(pid);
                let mut stack = children(pid);
                while let Some(child) = stack.pop() {
                    targets.push(child);
                    stack.extend(children(child));
                }
            }
        }
        let mut unreaped = std::mem::take(&mut state.unreaped);
        drop(state);
        unreaped.extend(pidfds(&zombies));
        let killed = kill_all(&targets);
        if !killed.is_empty() {
            tracing::debug!(
                killed = killed.len(),
                "killed processes a command left behind"
            );
        }
        unreaped.extend(killed);
        reap(unreaped)
    }

    /// Keeps `left` to reap at a later end of call.
    pub(crate) fn keep_unreaped(left: Vec<OwnedFd>) {
        if !left.is_empty() {
            state().unreaped.extend(left);
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        let left = self.finish();
        Self::keep_unreaped(left);
    }
}

/// Reaps, without waiting, each process of `pidfds` that is a dead child of this process;
/// returns the ones still alive (killed, not dead yet). Processes that are not our children
/// (`ECHILD`) are dropped: their parent reaps them.
pub(crate) fn reap(pidfds: Vec<OwnedFd>) -> Vec<OwnedFd> {
    pidfds
        .into_iter()
        .filter(|fd| {
            matches!(
                rustix::process::waitid(
                    WaitId::PidFd(std::os::fd::AsFd::as_fd(fd)),
                    WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
                ),
                Ok(None)
            )
        })
        .collect()
}

/// Pidfds of `pids` (those still there).
fn pidfds(pids: &[u32]) -> Vec<OwnedFd> {
    pids.iter()
        .filter_map(|&raw| {
            let pid = Pid::from_raw(i32::try_from(raw).ok()?)?;
            rustix::process::pidfd_open(pid, PidfdFlags::empty()).ok()
        })
        .collect()
}

/// Signals each of `pids` with `SIGKILL` through a pidfd; returns the pidfds of those
/// signalled.
fn kill_all(pids: &[u32]) -> Vec<OwnedFd> {
    pidfds(pids)
        .into_iter()
        .filter(|fd| rustix::process::pidfd_send_signal(fd, Signal::KILL).is_ok())
        .collect()
}

/// The direct children of process `pid` (of all its threads).
pub(crate) fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for task in tasks.flatten() {
        let Ok(text) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        found.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    found
}

/// What `/proc/<pid>/stat` says of a process.
struct Stat {
    zombie: bool,
    pgrp: u32,
    start: u64,
}

/// The state, process group and start time of `pid`; `None` if gone.
fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields start after the last ')'.
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    // Field 3 is the state, 5 the process group, 22 the start time.
    Some(Stat {
        zombie: *fields.first()? == "Z",
        pgrp: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// The start time of `pid` in clock ticks since boot.
fn start_time(pid: u32) -> Option<u64> {
    stat(pid).map(|stat| stat.start)
}

/// Kills every process whose environment holds the variable `needle` (`NAME=value`), other
/// than this one; returns the pidfds of those signalled.
pub(crate) fn kill_marked(needle: &str) -> Vec<OwnedFd> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let own = std::process::id();
    let mut killed = Vec::new();
    for entry in entries.flatten() {
        let Some(raw) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if raw == own || !environ_has(raw, needle) {
            continue;
        }
        // Pin the process with a pidfd, check it is still the one that matched (the pid may
        // have been reused), and signal it through the pidfd.
        let Some(pid) = i32::try_from(raw).ok().and_then(Pid::from_raw) else {
            continue;
        };
        let Ok(pidfd) = rustix::process::pidfd_open(pid, PidfdFlags::empty()) else {
            continue;
        };
        if environ_has(raw, needle)
            && rustix::process::pidfd_send_signal(&pidfd, Signal::KILL).is_ok()
        {
            killed.push(pidfd);
        }
    }
    if !killed.is_empty() {
        tracing::debug!(
            killed = killed.len(),
            "killed processes that left the command's process group"
        );
    }
    killed
}

fn environ_has(pid: u32, needle: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
        environ
            .split(|byte| *byte == 0)
            .any(|var| var == needle.as_bytes())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracked_guards_register_and_unregister() {
        let a = Tracked::new(999_999_001);
        let b = Tracked::surviving(999_999_001);
        assert_eq!(state().tracked.get(&999_999_001), Some(&(2, true)));
        drop(a);
        assert!(state().tracked.contains_key(&999_999_001));
        drop(b);
        assert!(!state().tracked.contains_key(&999_999_001));
    }

    #[test]
    fn children_and_stat_see_a_spawned_child() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        assert!(children(std::process::id()).contains(&child.id()));
        let info = stat(child.id()).unwrap();
        assert!(info.start > 0);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
