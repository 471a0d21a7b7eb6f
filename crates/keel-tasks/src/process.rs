//! Processes on Linux: a process's start time (so a reused pid is not mistaken for it),
//! whether it is alive, and detaching a supervisor. Process groups are keel-sandbox's
//! ([`keel_sandbox::spawn_in_group`], [`keel_sandbox::kill_group`]).

/// The start time of process `pid`, in clock ticks since boot (`/proc/<pid>/stat` field 22),
/// or `None` if there is no such process.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces and parentheses.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // fields[0] is field 3 (state); field 22 is fields[19].
    if fields.first() == Some(&"Z") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// Whether the process `pid` that started at `started` (clock ticks since boot) still runs.
pub fn is_alive(pid: u32, started: u64) -> bool {
    start_time(pid) == Some(started)
}

/// Makes this process the leader of a new session (no controlling terminal), so that it
/// outlives the terminal and the process that started it.
pub fn detach() -> std::io::Result<()> {
    rustix::process::setsid().map(|_| ()).map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_wrong_start_time_is_not() {
        let pid = std::process::id();
        let started = start_time(pid).unwrap();
        assert!(is_alive(pid, started));
        assert!(!is_alive(pid, started + 1));
        assert!(!is_alive(u32::MAX - 1, started));
    }
}
