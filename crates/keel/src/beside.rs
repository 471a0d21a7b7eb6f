//! Work started on a thread of its own while the builder goes on, taken where its result is
//! needed: the slow reads of a start (the project's context, the task store) overlap the rest.

use std::sync::mpsc::{Receiver, sync_channel};

/// `work` running beside the caller; [`Beside::wait`] gives its result.
pub(crate) struct Beside<T, F> {
    /// The thread's result, sent the moment it is ready (not when the thread has exited:
    /// under load a thread's exit can come a good half millisecond after its last statement).
    result: Option<Receiver<T>>,
    work: F,
}

impl<T, F> Beside<T, F>
where
    T: Send + 'static,
    F: FnOnce() -> T + Clone + Send + 'static,
{
    /// Starts `work` on a new thread (or, when no thread can be started, later in `wait`).
    pub(crate) fn start(name: &str, work: F) -> Self {
        let (sender, receiver) = sync_channel(1);
        let on_thread = work.clone();
        let result = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                // Nobody waiting any more is no reason to fail.
                let _ = sender.send(on_thread());
            })
            .map_err(|err| tracing::debug!("{name} runs in line: no thread: {err}"))
            .ok()
            .map(|_detached| receiver);
        Self { result, work }
    }

    /// The result: the thread's, or `work` run here if the thread could not start or died.
    pub(crate) fn wait(self) -> T {
        match self.result.map(|result| result.recv()) {
            Some(Ok(result)) => result,
            Some(Err(_)) | None => (self.work)(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Beside;

    #[test]
    fn the_result_comes_from_the_thread() {
        let caller = std::thread::current().id();
        let beside = Beside::start("test", move || std::thread::current().id() != caller);
        assert!(beside.wait());
    }

    #[test]
    fn work_whose_thread_died_runs_again_in_line() {
        let caller = std::thread::current().id();
        let beside = Beside::start("test", move || {
            // Dies on its thread (its result is never sent), succeeds in line.
            assert_eq!(std::thread::current().id(), caller);
            7
        });
        assert_eq!(beside.wait(), 7);
    }
}
