//! Type-ahead: what the person types while a turn runs.
//!
//! While a turn runs the terminal's echo is off and its line discipline non-canonical (Ctrl-C
//! still raises SIGINT; Ctrl-\ and Ctrl-Z do not stop keel meanwhile), so typed keys never
//! land in the streamed answer; a thread reads them into a [`Queue`] (backspace, Ctrl-U and
//! Ctrl-W edit it; escape sequences are dropped) and each line ended with Enter is shown,
//! dimmed, as `queued: …`. When the turn ends the queue becomes the next prompt's initial
//! text, to send with Enter or edit — never sent by itself.
//!
//! Type-ahead never answers a question: before an approval is asked the capture is paused
//! (the terminal as it was), what it queued is thrown away and said so, and the kernel's input
//! buffer is flushed; the capture resumes after the answer. The terminal is restored whenever
//! the capture stops: at the turn's end, on Ctrl-C (the turn ends), when the guard is dropped
//! (a panic unwinding) and from a panic hook.

use std::io::Read;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::sys::termios::{self, LocalFlags, SetArg, SpecialCharacterIndices, Termios};

use super::view::{View, printable};

/// The terminal settings from before the capture, while it runs: what every way out
/// restores.
static SAVED: Mutex<Option<Termios>> = Mutex::new(None);

/// Installs the panic hook that restores the terminal, once.
static PANIC_HOOK: Once = Once::new();

/// Puts the terminal back as it was before the capture, if a capture changed it.
fn restore_terminal() {
    let saved = SAVED.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(saved) = saved
        && let Err(err) = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, &saved)
    {
        tracing::debug!("cannot restore the terminal: {err}");
    }
}

/// What the person typed while a turn ran: finished lines and the line being typed.
#[derive(Debug, Default)]
pub(super) struct Queue {
    lines: Vec<String>,
    current: Vec<u8>,
    escape: Escape,
}

/// Where the queue is in an escape sequence (arrow keys and the like, dropped).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Escape {
    /// Not in one.
    #[default]
    None,
    /// After ESC.
    Start,
    /// After `ESC [`: until a final byte.
    Csi,
    /// After `ESC O`: one more byte.
    Ss3,
}

impl Queue {
    /// Takes `bytes` as typed; returns the lines they finished.
    pub(super) fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut finished = Vec::new();
        for &byte in bytes {
            match self.escape {
                Escape::Start => {
                    self.escape = match byte {
                        b'[' => Escape::Csi,
                        b'O' => Escape::Ss3,
                        _ => Escape::None,
                    };
                    continue;
                }
                Escape::Csi => {
                    if (0x40..=0x7e).contains(&byte) {
                        self.escape = Escape::None;
                    }
                    continue;
                }
                Escape::Ss3 => {
                    self.escape = Escape::None;
                    continue;
                }
                Escape::None => {}
            }
            match byte {
                0x1b => self.escape = Escape::Start,
                b'\r' | b'\n' => {
                    let line = String::from_utf8_lossy(&self.current).trim().to_owned();
                    self.current.clear();
                    if !line.is_empty() {
                        finished.push(line.clone());
                        self.lines.push(line);
                    }
                }
                0x7f | 0x08 => self.delete_char(),
                0x15 => self.current.clear(),
                0x17 => self.delete_word(),
                b'\t' => self.current.push(b' '),
                byte if byte < 0x20 => {}
                byte => self.current.push(byte),
            }
        }
        finished
    }

    /// Backspace: the last character (all its UTF-8 bytes) goes.
    fn delete_char(&mut self) {
        while let Some(byte) = self.current.pop() {
            if byte & 0xc0 != 0x80 {
                break;
            }
        }
    }

    /// Ctrl-W: the last word (and the blanks after it) goes.
    fn delete_word(&mut self) {
        while self.current.last() == Some(&b' ') {
            self.current.pop();
        }
        while self.current.last().is_some_and(|&b| b != b' ') {
            self.current.pop();
        }
    }

    /// Everything queued, lines joined by newlines (the line being typed last); the queue is
    /// empty afterwards.
    pub(super) fn take(&mut self) -> String {
        let mut lines = std::mem::take(&mut self.lines);
        let current = String::from_utf8_lossy(&std::mem::take(&mut self.current))
            .trim()
            .to_owned();
        if !current.is_empty() {
            lines.push(current);
        }
        self.escape = Escape::None;
        lines.join("\n")
    }
}

/// A running capture: the reader thread and how to stop it.
struct Capture {
    stop: Arc<AtomicBool>,
    reader: JoinHandle<()>,
}

/// The type-ahead of the session's terminal; clones share it (the prompt's loop starts and
/// finishes it, approval questions pause it).
#[derive(Clone, Default)]
pub(super) struct TypeAhead {
    capture: Arc<Mutex<Option<Capture>>>,
    queue: Arc<Mutex<Queue>>,
}

/// Stops the capture when dropped (the terminal restored), also when a panic unwinds.
pub(super) struct Capturing<'a>(&'a TypeAhead);

impl Drop for Capturing<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

impl TypeAhead {
    /// Starts capturing: the terminal's echo off, typed keys queued and each finished line
    /// shown on `view` as `queued: …`. Nothing when stdin is not a terminal or a capture
    /// runs. The returned guard stops it.
    pub(super) fn start(&self, view: &View) -> Capturing<'_> {
        self.resume(view);
        Capturing(self)
    }

    /// Starts capturing again after [`TypeAhead::pause`] (or for the first time).
    pub(super) fn resume(&self, view: &View) {
        let mut capture = self.capture.lock().unwrap_or_else(PoisonError::into_inner);
        if capture.is_some() {
            return;
        }
        let stdin = std::io::stdin();
        let Ok(saved) = termios::tcgetattr(stdin.as_fd()) else {
            return;
        };
        let Ok(input) = stdin.as_fd().try_clone_to_owned() else {
            return;
        };
        PANIC_HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore_terminal();
                previous(info);
            }));
        });
        let mut quiet = saved.clone();
        quiet
            .local_flags
            .remove(LocalFlags::ECHO | LocalFlags::ICANON);
        // Reads return after a tenth of a second with what there is (maybe nothing), so the
        // reader notices when it is told to stop.
        quiet.control_chars[SpecialCharacterIndices::VMIN as usize] = 0;
        quiet.control_chars[SpecialCharacterIndices::VTIME as usize] = 1;
        // Ctrl-\ and Ctrl-Z are keys, not signals, while echo is off: a SIGQUIT's core dump or
        // a stop would leave the terminal without echo. (Ctrl-C still cancels the turn.)
        for key in [
            SpecialCharacterIndices::VQUIT,
            SpecialCharacterIndices::VSUSP,
        ] {
            quiet.control_chars[key as usize] = 0;
        }
        *SAVED.lock().unwrap_or_else(PoisonError::into_inner) = Some(saved);
        if let Err(err) = termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &quiet) {
            tracing::debug!("cannot turn the terminal's echo off: {err}");
            restore_terminal();
            return;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (stop, queue, view) = (stop.clone(), self.queue.clone(), view.clone());
            std::thread::spawn(move || read_keys(std::fs::File::from(input), &stop, &queue, &view))
        };
        *capture = Some(Capture { stop, reader });
    }

    /// Stops capturing and restores the terminal; what was queued stays queued. Returns
    /// whether a capture was running.
    pub(super) fn pause(&self) -> bool {
        self.stop()
    }

    /// Stops capturing (the reader thread joined) and restores the terminal.
    fn stop(&self) -> bool {
        let capture = self
            .capture
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(capture) = capture else {
            return false;
        };
        capture.stop.store(true, Ordering::SeqCst);
        let _ = capture.reader.join();
        restore_terminal();
        true
    }

    /// Everything queued, emptied: what the next prompt starts with.
    pub(super) fn take(&self) -> String {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// The reader thread: queues what `input` gives until `stop` is set or the terminal fails.
fn read_keys(mut input: std::fs::File, stop: &AtomicBool, queue: &Mutex<Queue>, view: &View) {
    let mut buffer = [0u8; 4096];
    while !stop.load(Ordering::SeqCst) {
        match input.read(&mut buffer) {
            // Nothing typed within the tenth of a second (or the terminal hung up).
            Ok(0) => std::thread::sleep(Duration::from_millis(10)),
            Ok(n) => {
                let finished = queue
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .feed(&buffer[..n]);
                for line in finished {
                    view.notice(&format!("queued: {}", printable(&line)));
                }
            }
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => {
                tracing::debug!("stopped reading type-ahead: {err}");
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_queued_and_edited_as_typed() {
        let mut queue = Queue::default();
        assert_eq!(queue.feed(b"fiz\x7fx the te"), Vec::<String>::new());
        assert_eq!(queue.feed(b"sts\r"), ["fix the tests"]);
        assert_eq!(queue.feed(b"caf\xc3\xa9\x7fe\rjunk\x15then "), ["cafe"]);
        assert_eq!(queue.feed(b"more words\x17"), Vec::<String>::new());
        assert_eq!(queue.take(), "fix the tests\ncafe\nthen more");
        assert_eq!(queue.take(), "");
    }

    #[test]
    fn escape_sequences_and_control_keys_are_dropped() {
        let mut queue = Queue::default();
        queue.feed(b"a\x1b[A\x1b[1;5Cb\x1bOPc\x04\x01\r\r");
        assert_eq!(queue.take(), "abc");
    }
}
