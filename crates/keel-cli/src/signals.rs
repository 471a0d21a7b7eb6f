//! Stopping keel: Ctrl-C cancels the running turn; SIGTERM and SIGHUP (the terminal closed,
//! a supervisor stopping keel) are handled the same way — cancel the run, let the session be
//! saved and what it started be killed — and then keel exits instead of waiting for more.

use std::sync::OnceLock;

use tokio_util::sync::CancellationToken;

/// Fired once SIGTERM or SIGHUP has arrived.
fn termination() -> &'static CancellationToken {
    static TERMINATION: OnceLock<CancellationToken> = OnceLock::new();
    TERMINATION.get_or_init(CancellationToken::new)
}

/// Replaces the default action of SIGTERM and SIGHUP (dying at once, leaving commands running
/// and the turn unsaved) with marking keel as terminating. Call once, inside the runtime.
pub(crate) fn install() {
    use tokio::signal::unix::{SignalKind, signal};
    for kind in [SignalKind::terminate(), SignalKind::hangup()] {
        match signal(kind) {
            Ok(mut stream) => {
                tokio::spawn(async move {
                    if stream.recv().await.is_some() {
                        tracing::info!(signal = ?kind, "terminating");
                        termination().cancel();
                    }
                });
            }
            Err(err) => tracing::warn!("cannot handle signal {kind:?}: {err}"),
        }
    }
}

/// Whether SIGTERM or SIGHUP has arrived.
pub(crate) fn terminating() -> bool {
    termination().is_cancelled()
}

/// Resolves when SIGTERM or SIGHUP arrives.
pub(crate) async fn terminated() {
    termination().cancelled().await;
}

/// What stopped the wait in [`interrupted`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interrupt {
    /// Ctrl-C (SIGINT).
    CtrlC,
    /// SIGTERM or SIGHUP: keel should stop once the run is cancelled and saved.
    Terminate,
}

/// Resolves at the next Ctrl-C, or at once when keel is terminating (when no Ctrl-C handler
/// can be installed, only termination ends the wait).
pub(crate) async fn interrupted() -> Interrupt {
    tokio::select! {
        biased;
        () = terminated() => Interrupt::Terminate,
        signal = tokio::signal::ctrl_c() => match signal {
            Ok(()) => Interrupt::CtrlC,
            Err(_) => {
                terminated().await;
                Interrupt::Terminate
            }
        },
    }
}
