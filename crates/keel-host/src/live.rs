//! One live session: its agent and engine session, the turn it runs, its approval mode, its
//! subscribers and questions, and what it has spent.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use keel::engine::{Approver, CancelHandle, RunOutcome, Session};
use keel::provider::ContentBlock;
use keel::{CodingAgent, RunEvent};
use keel_config::LiveMode;
use tokio::sync::oneshot;

use crate::HostError;
use crate::approver::ModeSwitch;
use crate::events::{Answer, HostEvent, Question, Role};
use crate::hub::{Hub, Subscription};
use crate::totals::Totals;

/// Whether a turn waits for the background tasks its run started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskWait {
    /// Wait for them to end, then let the model check their results (as `keel exec` does).
    Wait,
    /// End the turn when the run ends; the tasks go on.
    Leave,
}

/// What a live session is, shared by its handles and its turn.
pub(crate) struct LiveInner {
    /// The engine session's id (it changes when the live session switches to another).
    pub(crate) id: Mutex<String>,
    pub(crate) cwd: PathBuf,
    pub(crate) coding: CodingAgent,
    pub(crate) session: tokio::sync::Mutex<Session>,
    pub(crate) cancel: Mutex<CancelHandle>,
    pub(crate) mode: ModeSwitch,
    pub(crate) hub: Arc<Hub>,
    totals: Mutex<Totals>,
    busy: AtomicBool,
    turns: AtomicU64,
    /// Stops the running turn's task (while it waits for background tasks).
    turn_task: Mutex<Option<tokio::task::AbortHandle>>,
    /// Whether the running turn is waiting for background tasks.
    waiting: AtomicBool,
}

/// A handle on one live session of a [`SessionHost`](crate::SessionHost). Cheap to clone;
/// every clone is the same session.
#[derive(Clone)]
pub struct LiveSession {
    pub(crate) inner: Arc<LiveInner>,
}

impl std::fmt::Debug for LiveSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSession")
            .field("id", &self.id())
            .field("cwd", &self.inner.cwd)
            .finish_non_exhaustive()
    }
}

/// A turn that was started: its number, and its outcome once it ends.
#[derive(Debug)]
pub struct Turn {
    /// The turn's number in the live session (1-based).
    pub number: u64,
    ended: oneshot::Receiver<Option<RunOutcome>>,
}

impl Turn {
    /// Waits for the turn to end; its outcome (`None` when it was stopped before any run
    /// finished).
    pub async fn outcome(self) -> Option<RunOutcome> {
        self.ended.await.ok().flatten()
    }
}

impl LiveSession {
    pub(crate) fn new(
        coding: CodingAgent,
        session: Session,
        mode: ModeSwitch,
        hub: Arc<Hub>,
    ) -> Self {
        let cancel = session.cancel_handle();
        Self {
            inner: Arc::new(LiveInner {
                id: Mutex::new(session.id().to_owned()),
                cwd: session.cwd().to_path_buf(),
                coding,
                session: tokio::sync::Mutex::new(session),
                cancel: Mutex::new(cancel),
                mode,
                hub,
                totals: Mutex::default(),
                busy: AtomicBool::new(false),
                turns: AtomicU64::new(0),
                turn_task: Mutex::new(None),
                waiting: AtomicBool::new(false),
            }),
        }
    }

    /// The session's id (the engine's, as its session file names it).
    pub fn id(&self) -> String {
        self.inner
            .id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The session's working directory.
    pub fn cwd(&self) -> &Path {
        &self.inner.cwd
    }

    /// The agent: its tools, delegates, snapshots, tasks.
    pub fn coding(&self) -> &CodingAgent {
        &self.inner.coding
    }

    /// The engine's session, between turns (waits for a running turn to end): its history,
    /// model, compaction, what a front end's commands read and change.
    pub async fn session(&self) -> tokio::sync::MutexGuard<'_, Session> {
        self.inner.session.lock().await
    }

    /// The engine's session if no turn holds it now (a front end's synchronous reads between
    /// turns).
    pub fn try_session(&self) -> Option<tokio::sync::MutexGuard<'_, Session>> {
        self.inner.session.try_lock().ok()
    }

    /// The approval mode now.
    pub fn mode(&self) -> LiveMode {
        self.inner.mode.get()
    }

    /// What changes the approval mode (shared with the session's approver).
    pub fn mode_switch(&self) -> &ModeSwitch {
        &self.inner.mode
    }

    /// Puts the session in `mode` from its next question on; every subscriber is told.
    pub fn set_mode(&self, mode: LiveMode) {
        self.inner.mode.set(mode);
        self.inner.hub.publish(HostEvent::ModeChanged { mode });
    }

    /// A new subscriber: the current turn's events so far, then every event. An
    /// [`Answerer`](Role::Answerer) may answer questions; only the owner answers a
    /// protected call's.
    pub fn subscribe(&self, role: Role) -> Subscription {
        self.inner.hub.subscribe(role, false)
    }

    /// The owner's subscription (the front end that opened the session), answering
    /// questions itself with [`answer`](Self::answer) when `role` says so, or once it
    /// attaches an approver with [`answer_with`](Self::answer_with).
    pub(crate) fn subscribe_owner(&self, role: Role) -> Subscription {
        self.inner.hub.subscribe(role, true)
    }

    /// `approver` answers, for `subscriber` (an answerer, or the owner), the questions put to
    /// it (a terminal, an editor, a program); an answer given with [`answer`](Self::answer)
    /// may come first.
    pub fn answer_with(
        &self,
        subscriber: &Subscription,
        approver: Arc<dyn Approver>,
    ) -> Result<(), HostError> {
        self.inner.hub.attach(subscriber.id(), approver)?;
        self.inner.hub.offer_pending(subscriber.id());
        Ok(())
    }

    /// `subscriber` answers question `question`: the first answer wins; a watcher, a
    /// question already answered, or a protected call answered by another than the owner is
    /// refused.
    pub fn answer(
        &self,
        subscriber: &Subscription,
        question: u64,
        answer: Answer,
    ) -> Result<(), HostError> {
        self.inner.hub.answer(subscriber.id(), question, answer)
    }

    /// The questions waiting for an answer now.
    pub fn questions(&self) -> Vec<Question> {
        self.inner.hub.waiting()
    }

    /// How many subscribers the session has.
    pub fn subscribers(&self) -> usize {
        self.inner.hub.subscriber_count()
    }

    /// Whether a turn is running.
    pub fn is_busy(&self) -> bool {
        self.inner.busy.load(Ordering::SeqCst)
    }

    /// What the session has spent in this process, over its turns.
    pub fn totals(&self) -> Totals {
        self.inner
            .totals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Adds what a front end spent outside a turn (a compaction it asked for, a sub-agent it
    /// ran) to [`totals`](Self::totals): its usage, cost (`None`: price unknown) and the same
    /// by provider.
    pub fn add_spent(
        &self,
        usage: &keel::provider::Usage,
        cost_usd: Option<f64>,
        by_provider: &keel::engine::CostByProvider,
    ) {
        self.inner
            .totals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .add(usage, cost_usd, by_provider);
    }

    /// Cancels the running turn (it ends as soon as the model call or tool stops); a turn
    /// waiting for background tasks stops waiting (the tasks go on).
    pub fn cancel(&self) {
        self.inner
            .cancel
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .cancel();
        if self.inner.waiting.load(Ordering::SeqCst)
            && let Some(task) = self
                .inner
                .turn_task
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
        {
            task.abort();
        }
    }

    /// Starts a turn with `prompt`; its events go to every subscriber, and the returned
    /// [`Turn`] gives its outcome. A session runs one turn at a time: while one runs, this
    /// is [`HostError::Busy`].
    pub fn start_turn(&self, prompt: Vec<ContentBlock>, wait: TaskWait) -> Result<Turn, HostError> {
        if self
            .inner
            .busy
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return Err(HostError::Busy(self.id()));
        }
        let number = self.inner.turns.fetch_add(1, Ordering::SeqCst) + 1;
        self.inner.hub.new_turn();
        let (ended, receiver) = oneshot::channel();
        let ended = Arc::new(Mutex::new(Some(ended)));
        let inner = self.inner.clone();
        let last = Arc::new(Mutex::new(None));
        let task = {
            let (ended, last) = (ended.clone(), last.clone());
            tokio::spawn(async move {
                let outcome = run_turn(&inner, number, prompt, wait, &last).await;
                finish_turn(&inner, number, outcome, &ended);
            })
        };
        *self
            .inner
            .turn_task
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(task.abort_handle());
        // A turn stopped while it waited for background tasks: its end is told from here.
        let watcher = self.inner.clone();
        tokio::spawn(async move {
            if task.await.is_err() {
                let outcome = last.lock().unwrap_or_else(PoisonError::into_inner).take();
                finish_turn(&watcher, number, outcome, &ended);
            }
        });
        Ok(Turn {
            number,
            ended: receiver,
        })
    }

    /// Moves this live session to `session` (a new conversation of the same agent, or a saved
    /// one resumed), between turns: subscribers stay, and are told the new id. The previous
    /// engine session is returned (end it first, for its `SessionEnd` hooks).
    pub(crate) async fn switch_to(&self, session: Session) -> Result<(String, Session), HostError> {
        if session.cwd() != self.inner.cwd {
            return Err(HostError::Invalid(format!(
                "session {} belongs to {}; this one works in {}",
                session.id(),
                session.cwd().display(),
                self.inner.cwd.display()
            )));
        }
        let mut current = self.inner.session.lock().await;
        let id = session.id().to_owned();
        *self
            .inner
            .cancel
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = session.cancel_handle();
        let previous = std::mem::replace(&mut *current, session);
        let old_id = std::mem::replace(
            &mut *self.inner.id.lock().unwrap_or_else(PoisonError::into_inner),
            id.clone(),
        );
        drop(current);
        self.inner.hub.publish(HostEvent::SessionSwitched { id });
        Ok((old_id, previous))
    }

    /// Runs `prompt` to its end ([`start_turn`](Self::start_turn), then its outcome).
    pub async fn run_turn(
        &self,
        prompt: Vec<ContentBlock>,
        wait: TaskWait,
    ) -> Result<Option<RunOutcome>, HostError> {
        Ok(self.start_turn(prompt, wait)?.outcome().await)
    }
}

/// Runs one turn, publishing its events; the outcome of the whole request.
async fn run_turn(
    inner: &Arc<LiveInner>,
    number: u64,
    prompt: Vec<ContentBlock>,
    wait: TaskWait,
    last: &Mutex<Option<RunOutcome>>,
) -> Option<RunOutcome> {
    let mut session = inner.session.lock().await;
    session.set_permission_mode(inner.mode.claude_name());
    inner.hub.publish(HostEvent::TurnStarted { turn: number });
    let events = match wait {
        TaskWait::Wait => inner.coding.run_content(&mut session, prompt).left_stream(),
        TaskWait::Leave => inner
            .coding
            .run_content_without_waiting(&mut session, prompt)
            .right_stream(),
    };
    futures::pin_mut!(events);
    let mut done = None;
    while let Some(event) = events.next().await {
        match &event {
            RunEvent::Agent(keel::engine::AgentEvent::Finished(outcome)) => {
                *last.lock().unwrap_or_else(PoisonError::into_inner) = Some(outcome.clone());
            }
            RunEvent::WaitingForTasks { .. } => inner.waiting.store(true, Ordering::SeqCst),
            RunEvent::TasksEnded => inner.waiting.store(false, Ordering::SeqCst),
            RunEvent::Done(outcome) => done = Some(outcome.clone()),
            _ => {}
        }
        inner.hub.publish(HostEvent::Run(event));
    }
    done.or_else(|| last.lock().unwrap_or_else(PoisonError::into_inner).take())
}

/// Ends turn `number` once: its cost added, its end told, the session free again.
fn finish_turn(
    inner: &Arc<LiveInner>,
    number: u64,
    outcome: Option<RunOutcome>,
    ended: &Mutex<Option<oneshot::Sender<Option<RunOutcome>>>>,
) {
    let Some(sender) = ended.lock().unwrap_or_else(PoisonError::into_inner).take() else {
        return;
    };
    if let Some(outcome) = &outcome {
        inner
            .totals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .add(&outcome.usage, outcome.cost_usd, &outcome.cost_by_provider);
    }
    inner.waiting.store(false, Ordering::SeqCst);
    inner.busy.store(false, Ordering::SeqCst);
    inner.hub.publish(HostEvent::TurnEnded {
        turn: number,
        outcome: outcome.clone(),
    });
    let _ = sender.send(outcome);
}
