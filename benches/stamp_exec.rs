//! For benches/startup.sh: prints the wall-clock time in nanoseconds on stderr, then execs
//! its arguments in the same process, so the time is taken right before `execve`. With
//! `--now` alone it only prints the time: `stamp_exec stamp_exec --now` prints the time before
//! `execve` and the time at `main` of a minimal Rust program, the host's own cost of a start.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};
use std::time::{SystemTime, UNIX_EPOCH};

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(program) = args.next() else {
        eprintln!("usage: stamp_exec PROGRAM [ARGS...]");
        return ExitCode::from(2);
    };
    let Ok(now) = SystemTime::now().duration_since(UNIX_EPOCH) else {
        eprintln!("stamp_exec: the clock is before 1970");
        return ExitCode::from(2);
    };
    let _ = writeln!(std::io::stderr(), "{}", now.as_nanos());
    if program == "--now" {
        return ExitCode::SUCCESS;
    }
    let err = Command::new(program).args(args).exec();
    eprintln!("stamp_exec: {err}");
    ExitCode::from(127)
}
