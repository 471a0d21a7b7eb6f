//! The `keel` binary driven in a real pseudo-terminal, as a person would: type a line, read
//! what it prints, press Ctrl-C or Ctrl-D.
//!
//! expectrl's own `expect` spins on a non-blocking read; this polls with short sleeps instead,
//! so that several tests waiting at once leave the CPU to the programs they test.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use expectrl::{Regex, WaitStatus};

/// How long to wait for any expected output.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(10);
/// The interactive prompt.
pub(crate) const PROMPT: &str = "keel> ";
/// How long to sleep between polls.
const POLL: Duration = Duration::from_millis(15);

/// A running `keel` on a pseudo-terminal.
pub(crate) struct Pty {
    session: expectrl::Session,
    /// Everything read so far, escape sequences removed.
    transcript: String,
    /// Everything read so far, as keel wrote it (for [`Pty::screen`]).
    raw: Vec<u8>,
}

/// The terminal's size: what ptyprocess gives a new pseudo-terminal.
pub(crate) const COLUMNS: u16 = 80;
/// The terminal's height.
pub(crate) const ROWS: u16 = 24;

/// A terminal emulator of the pseudo-terminal's size, fed `raw`.
fn emulate(raw: &[u8]) -> vt100::Parser {
    let size = |n| std::num::NonZeroU16::new(n).unwrap();
    let mut parser = vt100::Parser::new(size(ROWS), size(COLUMNS), 0);
    parser.process(raw);
    parser
}

/// `text` without ANSI escape sequences and carriage returns: what a person would read.
pub(crate) fn plain(text: &str) -> String {
    let escapes =
        regex::Regex::new(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[=>()][0-9A-Za-z]?)")
            .unwrap();
    escapes.replace_all(text, "").replace('\r', "")
}

impl Pty {
    /// Starts `command` on a new pseudo-terminal (80 columns), as its controlling terminal.
    pub(crate) fn spawn(mut command: Command) -> Self {
        // The terminal is stdin, stdout and stderr.
        command
            .stdin(Stdio::inherit())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .env("TERM", "xterm");
        let session = expectrl::Session::spawn(command).unwrap();
        Self {
            session,
            transcript: String::new(),
            raw: Vec::new(),
        }
    }

    /// Turns the terminal's echo on, as a person's terminal has it (a new pseudo-terminal
    /// starts without: keys typed while keel is not reading a line would not show).
    pub(crate) fn echo_on(&mut self) {
        self.session.get_process_mut().set_echo(true, None).unwrap();
    }

    /// Whether the terminal echoes what is typed now.
    pub(crate) fn echoes(&self) -> bool {
        self.session.get_process().get_echo().unwrap()
    }

    /// Reads whatever is there now into the transcript; whether the terminal was closed.
    fn drain(&mut self) -> bool {
        match self.session.check(Regex("(?s).+")) {
            Ok(found) => {
                if let Some(bytes) = found.get(0) {
                    self.raw.extend_from_slice(bytes);
                    self.transcript
                        .push_str(&plain(&String::from_utf8_lossy(bytes)));
                }
                false
            }
            Err(expectrl::Error::Eof) => true,
            // Linux reports a closed terminal as EIO.
            Err(expectrl::Error::IO(err)) if err.raw_os_error() == Some(5) => true,
            Err(err) => panic!("reading the terminal: {err}"),
        }
    }

    /// Waits until keel prints `text`; returns what it printed before (escape sequences
    /// removed). Panics with everything printed so far after [`TIMEOUT`].
    pub(crate) fn expect(&mut self, text: &str) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            match self.session.check(text) {
                Ok(found) if found.get(0).is_some() => {
                    self.raw.extend_from_slice(found.before());
                    self.raw.extend_from_slice(text.as_bytes());
                    let before = plain(&String::from_utf8_lossy(found.before()));
                    self.transcript.push_str(&before);
                    self.transcript.push_str(text);
                    return before;
                }
                Ok(_) => {}
                Err(err) => {
                    self.drain();
                    panic!(
                        "keel's terminal closed ({err}) before it printed {text:?}; it printed:\n{}",
                        self.transcript
                    );
                }
            }
            if Instant::now() > deadline {
                self.drain();
                panic!(
                    "keel did not print {text:?} within {TIMEOUT:?}; it printed:\n{}",
                    self.transcript
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits for the prompt.
    pub(crate) fn prompt(&mut self) -> String {
        self.expect(PROMPT)
    }

    /// Types `text`, without Enter.
    pub(crate) fn send(&mut self, text: &str) {
        self.session.send(text).unwrap();
    }

    /// Types `line` and Enter.
    pub(crate) fn send_line(&mut self, line: &str) {
        self.session.send(format!("{line}\r")).unwrap();
    }

    /// Presses Ctrl-C.
    pub(crate) fn ctrl_c(&mut self) {
        self.session.send([3u8]).unwrap();
    }

    /// Presses Ctrl-D.
    pub(crate) fn ctrl_d(&mut self) {
        self.session.send([4u8]).unwrap();
    }

    /// Everything printed so far, escape sequences removed.
    pub(crate) fn transcript(&self) -> &str {
        &self.transcript
    }

    /// The screen a person would see now (up to what was last read): the 80×24 terminal's
    /// visible rows as a terminal emulator draws keel's output, trailing blanks trimmed.
    /// Colours and cursor moves are applied, not shown; for snapshots of what is on screen.
    pub(crate) fn screen(&self) -> String {
        let parser = emulate(&self.raw);
        let rows: Vec<String> = parser
            .screen()
            .rows(0, COLUMNS)
            .map(|row| row.trim_end().to_owned())
            .collect();
        rows.join("\n").trim_end().to_owned() + "\n"
    }

    /// The screen from the row holding `text` down (what a turn drew, when `text` is its
    /// prompt line). Panics with the screen when `text` is not on it.
    pub(crate) fn screen_from(&self, text: &str) -> String {
        let screen = self.screen();
        let start = screen
            .find(text)
            .unwrap_or_else(|| panic!("{text:?} is not on the screen:\n{screen}"));
        let row_start = screen[..start].rfind('\n').map_or(0, |at| at + 1);
        screen[row_start..].to_owned()
    }

    /// The screen's cells with their attributes: whether the text `needle` is drawn bold,
    /// in a colour, etc. is read from here. `None` if `needle` is not on screen.
    pub(crate) fn screen_cell_of(&self, needle: &str) -> Option<vt100::Cell> {
        let parser = emulate(&self.raw);
        let screen = parser.screen();
        for (row, text) in screen.rows(0, COLUMNS).enumerate() {
            if let Some(byte) = text.find(needle) {
                let col = text[..byte].chars().count();
                let cell = screen.cell(u16::try_from(row).ok()?, u16::try_from(col).ok()?)?;
                return Some(cell.clone());
            }
        }
        None
    }

    /// Waits for keel to exit; returns its exit code and everything it printed.
    pub(crate) fn wait(mut self) -> (i32, String) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let closed = self.drain();
            match self.session.get_process().status().unwrap() {
                WaitStatus::StillAlive => {}
                WaitStatus::Exited(_, code) => {
                    if !closed {
                        self.drain();
                    }
                    return (code, self.transcript);
                }
                other => panic!(
                    "keel ended with {other:?}; it printed:\n{}",
                    self.transcript
                ),
            }
            if Instant::now() > deadline {
                panic!(
                    "keel did not exit within {TIMEOUT:?}; it printed:\n{}",
                    self.transcript
                );
            }
            std::thread::sleep(POLL);
        }
    }
}
