//! One live session's hub: its events fanned out to every subscriber, and its approval
//! questions brokered between them.
//!
//! Fan-out: the owner's queue (the front end that opened the session) is unbounded: it is
//! never dropped and never holds up the turn (a front end that does not read it drops it).
//! Every other subscriber has a bounded queue: one that falls
//! [`HostOptions::subscriber_buffer`] events behind is dropped, told so by a last
//! [`HostEvent::Dropped`], and the others see [`HostEvent::SubscriberDropped`]: a stalled
//! watcher never holds up the turn. The current turn's events are kept (at most
//! [`HostOptions::replay_limit`] of them) and replayed to a late subscriber first.
//!
//! Questions: each is published to every subscriber and put to every answerer that attached
//! an approver; the first answer wins, the other askers are stopped, and everyone sees the
//! answer. A protected call is put to the owner alone. A question waits as the owner said
//! ([`QuestionWait`]); with no answerer subscribed, a call is refused and a run goes on past
//! its iteration warning, as a headless run's would.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Duration;

use keel::engine::{ApprovalRequest, Approver, Decision, DenyGated};
use tokio::sync::{mpsc, oneshot};

use crate::HostError;
use crate::events::{Answer, AnsweredBy, HostEvent, Question, QuestionKind, Role, SubscriberId};

/// How long an unanswered question waits, as the owner of the session says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QuestionWait {
    /// Until someone answers (a person at a terminal).
    #[default]
    Forever,
    /// This long; then a call is refused and a run goes on past its iteration warning (an
    /// unattended host).
    DenyAfter(Duration),
}

/// How a host's live sessions buffer and replay events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostOptions {
    /// The events a subscriber other than the owner may fall behind before it is dropped.
    pub subscriber_buffer: usize,
    /// The most events of the current turn kept for a late subscriber.
    pub replay_limit: usize,
}

impl Default for HostOptions {
    fn default() -> Self {
        Self {
            subscriber_buffer: 1024,
            replay_limit: 2048,
        }
    }
}

/// Where a subscriber's events go: the owner's queue has no bound, the others' have one.
enum Sender {
    Owner(mpsc::UnboundedSender<HostEvent>),
    Bounded(mpsc::Sender<HostEvent>),
}

/// What a subscriber reads its events from.
enum Receiver {
    Owner(mpsc::UnboundedReceiver<HostEvent>),
    Bounded(mpsc::Receiver<HostEvent>),
}

/// Why an event was not delivered.
enum Undelivered {
    /// The subscriber is too far behind.
    Full,
    /// The subscriber went away.
    Closed,
}

impl Sender {
    fn send(&self, event: HostEvent) -> Result<(), Undelivered> {
        match self {
            Self::Owner(sender) => sender.send(event).map_err(|_| Undelivered::Closed),
            Self::Bounded(sender) => sender.try_send(event).map_err(|err| match err {
                mpsc::error::TrySendError::Full(_) => Undelivered::Full,
                mpsc::error::TrySendError::Closed(_) => Undelivered::Closed,
            }),
        }
    }
}

/// One subscriber, as the hub keeps it.
struct Entry {
    id: SubscriberId,
    role: Role,
    owner: bool,
    sender: Sender,
    /// Why it was dropped, for its last event.
    dropped: Arc<OnceLock<String>>,
    /// What answers questions for it, when it attached something.
    approver: Option<Arc<dyn Approver>>,
}

/// The subscribers and the current turn's events.
#[derive(Default)]
struct Subscribers {
    next_id: u64,
    entries: Vec<Entry>,
    replay: VecDeque<HostEvent>,
}

/// A question waiting for its answer.
struct Pending {
    question: Question,
    reply: oneshot::Sender<(Answer, AnsweredBy)>,
    /// The attached approvers asking it; stopped once it is answered.
    asks: Vec<tokio::task::JoinHandle<()>>,
}

/// One live session's fan-out and approval broker.
pub(crate) struct Hub {
    options: HostOptions,
    wait: QuestionWait,
    subscribers: Mutex<Subscribers>,
    pending: Mutex<HashMap<u64, Pending>>,
    next_question: AtomicU64,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Hub {
    pub(crate) fn new(options: HostOptions, wait: QuestionWait) -> Arc<Self> {
        Arc::new(Self {
            options,
            wait,
            subscribers: Mutex::default(),
            pending: Mutex::default(),
            next_question: AtomicU64::new(1),
        })
    }

    /// Forgets the last turn's events: a turn begins.
    pub(crate) fn new_turn(&self) {
        locked(&self.subscribers).replay.clear();
    }

    /// A new subscriber, which first receives the current turn's events so far.
    pub(crate) fn subscribe(self: &Arc<Self>, role: Role, owner: bool) -> Subscription {
        let mut state = locked(&self.subscribers);
        state.next_id += 1;
        let id = SubscriberId(state.next_id);
        let replayed = state.replay.len();
        let (sender, receiver) = if owner {
            let (sender, receiver) = mpsc::unbounded_channel();
            (Sender::Owner(sender), Receiver::Owner(receiver))
        } else {
            // Room for the replay too.
            let (sender, receiver) =
                mpsc::channel(self.options.subscriber_buffer.max(1) + replayed);
            (Sender::Bounded(sender), Receiver::Bounded(receiver))
        };
        for event in &state.replay {
            let _ = sender.send(event.clone());
        }
        let dropped = Arc::new(OnceLock::new());
        state.entries.push(Entry {
            id,
            role,
            owner,
            sender,
            dropped: dropped.clone(),
            approver: None,
        });
        drop(state);
        if role == Role::Answerer {
            self.offer_pending(id);
        }
        Subscription {
            id,
            receiver,
            dropped,
            told_dropped: false,
            replayed,
            hub: Arc::downgrade(self),
        }
    }

    /// The subscriber `id`'s role and whether it owns the session, while it is subscribed.
    fn role_of(&self, id: SubscriberId) -> Option<(Role, bool)> {
        locked(&self.subscribers)
            .entries
            .iter()
            .find(|entry| entry.id == id)
            .map(|entry| (entry.role, entry.owner))
    }

    /// Whether any subscriber may answer `question`.
    fn has_answerer(&self, question: &Question) -> bool {
        locked(&self.subscribers)
            .entries
            .iter()
            .any(|entry| may_answer(entry.role, entry.owner, question))
    }

    /// Lets `approver` answer, for subscriber `id`, every question put to it from now on
    /// (and those waiting now).
    pub(crate) fn attach(
        &self,
        id: SubscriberId,
        approver: Arc<dyn Approver>,
    ) -> Result<(), HostError> {
        {
            let mut state = locked(&self.subscribers);
            let entry = state
                .entries
                .iter_mut()
                .find(|entry| entry.id == id)
                .ok_or_else(|| HostError::NotAllowed(format!("{id} is no longer subscribed")))?;
            if entry.role != Role::Answerer && !entry.owner {
                return Err(HostError::NotAllowed(format!(
                    "{id} is a watcher: only an answerer answers questions"
                )));
            }
            // The owner answers from the moment it attaches something that answers.
            entry.role = Role::Answerer;
            entry.approver = Some(approver);
        }
        Ok(())
    }

    /// Removes subscriber `id`; a waiting question nobody is left to answer is answered as
    /// a run without a person would be.
    pub(crate) fn unsubscribe(self: &Arc<Self>, id: SubscriberId) {
        locked(&self.subscribers)
            .entries
            .retain(|entry| entry.id != id);
        let orphaned: Vec<Question> = locked(&self.pending)
            .values()
            .map(|pending| pending.question.clone())
            .filter(|question| !self.has_answerer(question))
            .collect();
        for question in orphaned {
            let answer = unattended(&question.kind);
            let _ = self.resolve(question.id, answer, AnsweredBy::NoAnswerer);
        }
    }

    /// Sends `event` to every subscriber; one too far behind (never the owner) is dropped,
    /// and the others are told.
    pub(crate) fn publish(&self, event: HostEvent) {
        let mut state = locked(&self.subscribers);
        if event.replayed() {
            state.replay.push_back(event.clone());
            while state.replay.len() > self.options.replay_limit {
                state.replay.pop_front();
            }
        }
        let mut dropped = Vec::new();
        state
            .entries
            .retain(|entry| match entry.sender.send(event.clone()) {
                Ok(()) => true,
                Err(Undelivered::Full) => {
                    let reason = format!(
                        "{} fell more than {} events behind; the session went on without it",
                        entry.id, self.options.subscriber_buffer
                    );
                    let _ = entry.dropped.set(reason.clone());
                    dropped.push((entry.id, reason));
                    false
                }
                Err(Undelivered::Closed) => false,
            });
        for (subscriber, reason) in dropped {
            let notice = HostEvent::SubscriberDropped { subscriber, reason };
            for entry in &state.entries {
                // A notice: one that is full now misses it, and is dropped at the next event.
                let _ = entry.sender.send(notice.clone());
            }
        }
    }

    /// Puts `kind` to the answerers and waits for the first answer (or the owner's wait to
    /// pass, or nobody to be left); every subscriber sees the question and its answer.
    pub(crate) async fn ask(self: &Arc<Self>, kind: QuestionKind) -> Answer {
        let id = self.next_question.fetch_add(1, Ordering::Relaxed);
        let question = Question { id, kind };
        let (reply, answered) = oneshot::channel();
        locked(&self.pending).insert(
            id,
            Pending {
                question: question.clone(),
                reply,
                asks: Vec::new(),
            },
        );
        // Withdraws the question if this future is dropped (the turn was cancelled).
        let mut withdraw = Withdraw {
            hub: Arc::downgrade(self),
            id,
            armed: true,
        };
        self.publish(HostEvent::Question(question.clone()));
        if !self.has_answerer(&question) {
            let _ = self.resolve(id, unattended(&question.kind), AnsweredBy::NoAnswerer);
        } else {
            self.put_to_approvers(&question, None);
        }
        let answered = match self.wait {
            QuestionWait::Forever => answered.await.ok(),
            QuestionWait::DenyAfter(after) => {
                let mut answered = answered;
                match tokio::time::timeout(after, &mut answered).await {
                    Ok(result) => result.ok(),
                    Err(_) => {
                        let _ =
                            self.resolve(id, timed_out(&question.kind, after), AnsweredBy::Timeout);
                        answered.await.ok()
                    }
                }
            }
        };
        withdraw.armed = false;
        let (answer, by) =
            answered.unwrap_or_else(|| (unattended(&question.kind), AnsweredBy::NoAnswerer));
        self.publish(HostEvent::Answered {
            question: id,
            answer: answer.clone(),
            by,
        });
        answer
    }

    /// Puts `question` to the attached approvers that may answer it (only `only`'s, when
    /// given); each one's answer resolves it, the first one winning.
    fn put_to_approvers(self: &Arc<Self>, question: &Question, only: Option<SubscriberId>) {
        let askers: Vec<(SubscriberId, Arc<dyn Approver>)> = locked(&self.subscribers)
            .entries
            .iter()
            .filter(|entry| only.is_none_or(|id| id == entry.id))
            .filter(|entry| may_answer(entry.role, entry.owner, question))
            .filter_map(|entry| entry.approver.clone().map(|a| (entry.id, a)))
            .collect();
        let mut handles = Vec::new();
        for (subscriber, approver) in askers {
            let hub = Arc::downgrade(self);
            let question = question.clone();
            handles.push(tokio::spawn(async move {
                let answer = match &question.kind {
                    QuestionKind::Call(request) => {
                        Answer::Decision(approver.approve(request).await)
                    }
                    QuestionKind::ContinuePastWarning { used, limit } => {
                        Answer::Continue(approver.continue_after_warning(*used, *limit).await)
                    }
                };
                if let Some(hub) = hub.upgrade() {
                    let _ = hub.resolve(question.id, answer, AnsweredBy::Subscriber(subscriber));
                }
            }));
        }
        if let Some(pending) = locked(&self.pending).get_mut(&question.id) {
            pending.asks.extend(handles);
        } else {
            for handle in handles {
                handle.abort();
            }
        }
    }

    /// Puts the questions waiting now to subscriber `id`, once it attached an approver.
    pub(crate) fn offer_pending(self: &Arc<Self>, id: SubscriberId) {
        let waiting: Vec<Question> = locked(&self.pending)
            .values()
            .map(|pending| pending.question.clone())
            .collect();
        for question in waiting {
            self.put_to_approvers(&question, Some(id));
        }
    }

    /// Subscriber `by` answers question `id`.
    pub(crate) fn answer(
        &self,
        by: SubscriberId,
        id: u64,
        answer: Answer,
    ) -> Result<(), HostError> {
        let question = locked(&self.pending)
            .get(&id)
            .map(|pending| pending.question.clone())
            .ok_or(HostError::NoQuestion(id))?;
        let Some((role, owner)) = self.role_of(by) else {
            return Err(HostError::NotAllowed(format!(
                "{by} is no longer subscribed"
            )));
        };
        if role == Role::Watcher {
            return Err(HostError::NotAllowed(format!(
                "{by} is a watcher: only an answerer answers questions"
            )));
        }
        if !may_answer(role, owner, &question) {
            return Err(HostError::NotAllowed(format!(
                "question {id} is about a protected call: only the front end that owns the \
                 session may answer it"
            )));
        }
        self.resolve(id, answer, AnsweredBy::Subscriber(by))
    }

    /// Answers question `id` (the first answer wins; a later one is refused).
    fn resolve(&self, id: u64, answer: Answer, by: AnsweredBy) -> Result<(), HostError> {
        let pending = locked(&self.pending)
            .remove(&id)
            .ok_or(HostError::NoQuestion(id))?;
        for ask in &pending.asks {
            ask.abort();
        }
        let _ = pending.reply.send((answer, by));
        Ok(())
    }

    /// Drops a question nobody answered before its turn went away.
    fn withdraw(&self, id: u64) {
        let Some(pending) = locked(&self.pending).remove(&id) else {
            return;
        };
        for ask in &pending.asks {
            ask.abort();
        }
        self.publish(HostEvent::QuestionWithdrawn { question: id });
    }

    /// The questions waiting for an answer now.
    pub(crate) fn waiting(&self) -> Vec<Question> {
        let mut questions: Vec<Question> = locked(&self.pending)
            .values()
            .map(|pending| pending.question.clone())
            .collect();
        questions.sort_by_key(|question| question.id);
        questions
    }

    /// Tells every subscriber the session closed, and ends their streams.
    pub(crate) fn close(&self) {
        self.publish(HostEvent::Closed);
        locked(&self.subscribers).entries.clear();
    }

    /// How many subscribers there are.
    pub(crate) fn subscriber_count(&self) -> usize {
        locked(&self.subscribers).entries.len()
    }
}

/// Whether a subscriber of `role` (the owner or not) may answer `question`.
fn may_answer(role: Role, owner: bool, question: &Question) -> bool {
    role == Role::Answerer && (owner || !question.owner_only())
}

/// The answer when nobody can give one: a call refused (as a headless run refuses it), a run
/// let go on past its warning.
fn unattended(kind: &QuestionKind) -> Answer {
    match kind {
        QuestionKind::Call(request) => Answer::Decision(refused(request)),
        QuestionKind::ContinuePastWarning { .. } => Answer::Continue(true),
    }
}

/// The answer when nobody answered within `after`.
fn timed_out(kind: &QuestionKind, after: Duration) -> Answer {
    match kind {
        QuestionKind::Call(request) => Answer::Decision(Decision::Deny(format!(
            "{} (nobody answered within {} s, so it was refused); do it another way or leave \
             it to the user",
            request.reason,
            after.as_secs()
        ))),
        QuestionKind::ContinuePastWarning { .. } => Answer::Continue(true),
    }
}

/// What a run with nobody to ask decides for `request`.
fn refused(request: &ApprovalRequest) -> Decision {
    DenyGated::decide(request)
}

/// Withdraws a question when the future asking it is dropped before an answer.
struct Withdraw {
    hub: Weak<Hub>,
    id: u64,
    /// Cleared once the question was answered.
    armed: bool,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        if self.armed
            && let Some(hub) = self.hub.upgrade()
        {
            hub.withdraw(self.id);
        }
    }
}

/// One subscriber's view of a live session: the current turn's events so far, then every
/// event as it happens. Dropping it unsubscribes.
pub struct Subscription {
    id: SubscriberId,
    receiver: Receiver,
    dropped: Arc<OnceLock<String>>,
    told_dropped: bool,
    replayed: usize,
    hub: Weak<Hub>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .field("replayed", &self.replayed)
            .finish_non_exhaustive()
    }
}

impl Subscription {
    /// The next event; `None` once the session is closed (or, after a last
    /// [`HostEvent::Dropped`], once this subscriber was dropped for falling behind).
    pub async fn next(&mut self) -> Option<HostEvent> {
        let event = match &mut self.receiver {
            Receiver::Owner(receiver) => receiver.recv().await,
            Receiver::Bounded(receiver) => receiver.recv().await,
        };
        match event {
            Some(event) => Some(event),
            None => self.dropped_notice(),
        }
    }

    /// The next event if one is waiting, without waiting.
    pub fn try_next(&mut self) -> Option<HostEvent> {
        let event = match &mut self.receiver {
            Receiver::Owner(receiver) => receiver.try_recv(),
            Receiver::Bounded(receiver) => receiver.try_recv(),
        };
        match event {
            Ok(event) => Some(event),
            Err(mpsc::error::TryRecvError::Disconnected) => self.dropped_notice(),
            Err(mpsc::error::TryRecvError::Empty) => None,
        }
    }

    /// The last event of a subscriber dropped for falling behind, once.
    fn dropped_notice(&mut self) -> Option<HostEvent> {
        if self.told_dropped {
            return None;
        }
        self.told_dropped = true;
        self.dropped.get().map(|reason| HostEvent::Dropped {
            reason: reason.clone(),
        })
    }

    /// This subscriber's id.
    pub fn id(&self) -> SubscriberId {
        self.id
    }

    /// How many of the first events were the current turn's replay.
    pub fn replayed(&self) -> usize {
        self.replayed
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(hub) = self.hub.upgrade() {
            hub.unsubscribe(self.id);
        }
    }
}

/// The answers of one live session's answerers, as the agent's approver sees them: what a
/// [`ModeApprover`](crate::ModeApprover) asks when its mode asks the person. Cheap to clone.
#[derive(Clone)]
pub struct Answers {
    hub: Arc<Hub>,
}

impl std::fmt::Debug for Answers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Answers").finish_non_exhaustive()
    }
}

impl Answers {
    pub(crate) fn new(hub: Arc<Hub>) -> Self {
        Self { hub }
    }
}

#[async_trait::async_trait]
impl Approver for Answers {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        match self
            .hub
            .ask(QuestionKind::Call(Box::new(request.clone())))
            .await
        {
            Answer::Decision(decision) => decision,
            // An answerer that says "go on" to a call has not allowed it.
            Answer::Continue(_) => refused(request),
        }
    }

    async fn continue_after_warning(&self, used: u32, limit: u32) -> bool {
        match self
            .hub
            .ask(QuestionKind::ContinuePastWarning { used, limit })
            .await
        {
            Answer::Continue(go_on) => go_on,
            Answer::Decision(decision) => {
                matches!(decision, Decision::Allow | Decision::AllowAlways)
            }
        }
    }
}
