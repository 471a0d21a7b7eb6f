//! Claude Code's `allowed-tools` honoured: once a session has used a skill that names some,
//! calls they cover run without asking for the rest of that session.
//!
//! The grant is the host's: [`SkillGrants`] is told which skills folders it trusts, and
//! [`UseSkillTool`](super::UseSkillTool) (given the grants with
//! [`with_grants`](super::UseSkillTool::with_grants)) records the rules of the skill it
//! loaded, as the host's index read them from the skill's file. [`GrantingApprover`] wraps
//! the host's approver and answers [`Approver::grants`] from them. The engine asks that only
//! for a call asked about because of what it would do: deny rules, ask rules, hooks,
//! protected paths and read-only modes are decided as before, so a skill never loosens them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use keel_engine::{ApprovalRequest, Approver, Decision, PermissionRule, RuleContext};
use serde_json::Value;

use super::{SkillIndex, SkillSummary};

/// The rules granted to sessions by the skills they used, and which skills folders may grant.
/// Share it behind an `Arc`: the `use_skill` tool records, the approver reads.
#[derive(Debug)]
pub struct SkillGrants {
    /// The skills folders whose skills' `allowed-tools` are honoured, canonical.
    trusted: Vec<PathBuf>,
    /// Where calls' paths and rules' path patterns start.
    context: RuleContext,
    /// The rules each session was granted, by session id.
    sessions: Mutex<HashMap<String, Vec<Granted>>>,
}

/// One rule a session holds, and the skill that granted it.
#[derive(Debug, Clone)]
struct Granted {
    skill: String,
    rule: PermissionRule,
}

/// What using a skill granted (see [`SkillGrants::activate`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Activation {
    /// The rules now granted to the session, as written in the skill.
    pub granted: Vec<String>,
    /// Why some or all of the skill's `allowed-tools` are not honoured, each naming the skill.
    pub notes: Vec<String>,
}

impl SkillGrants {
    /// Grants honouring the skills of `trusted_dirs` (the user's own skills folders, and the
    /// project's only when the person trusts the project); `context` anchors the rules' path
    /// patterns (the working directory, the project root, the home directory).
    pub fn new(trusted_dirs: &[PathBuf], context: RuleContext) -> Self {
        Self {
            trusted: trusted_dirs.iter().map(|dir| canonical(dir)).collect(),
            context,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `skill`'s `allowed-tools` may be honoured: it was found in a trusted folder.
    pub fn trusts(&self, skill: &SkillSummary) -> bool {
        self.trusted.contains(&canonical(skill.skills_dir()))
    }

    /// What is wrong with the `allowed-tools` of `index`'s skills, for the host's warnings:
    /// one line naming the skills whose lists are ignored because their folder is not trusted,
    /// and one per entry that is not a permission rule.
    pub fn check(&self, index: &SkillIndex) -> Vec<String> {
        let mut warnings = Vec::new();
        let mut untrusted = Vec::new();
        for skill in index.skills() {
            let Some(tools) = skill.allowed_tools().filter(|tools| !tools.is_empty()) else {
                continue;
            };
            if !self.trusts(skill) {
                untrusted.push(format!("`{}`", skill.name));
                continue;
            }
            warnings.extend(tools.iter().filter_map(|text| {
                PermissionRule::parse(text)
                    .err()
                    .map(|err| bad_rule(skill, text, &err))
            }));
        }
        if !untrusted.is_empty() {
            warnings.push(format!(
                "the allowed-tools of the project's skills {} are ignored: the project is not \
                 trusted, so using them grants nothing (calls are asked about as usual)",
                untrusted.join(", ")
            ));
        }
        warnings
    }

    /// Session `session_id` used `skill`: its `allowed-tools` are granted to the session for
    /// the rest of it, if the skill's folder is trusted. Entries that are not permission
    /// rules are left out. `skill` must be the host's (from its [`SkillIndex`]), never
    /// something a model or a tool wrote.
    pub fn activate(&self, session_id: &str, skill: &SkillSummary) -> Activation {
        let mut activation = Activation::default();
        let Some(tools) = skill.allowed_tools().filter(|tools| !tools.is_empty()) else {
            return activation;
        };
        if !self.trusts(skill) {
            let note = format!(
                "the allowed-tools of skill `{}` ({}) are ignored: it is the project's and the \
                 project is not trusted, so calls are asked about as usual",
                skill.name,
                skill.path.display()
            );
            tracing::warn!("{note}");
            activation.notes.push(note);
            return activation;
        }
        let mut rules = Vec::new();
        for text in tools {
            match PermissionRule::parse(text) {
                Ok(rule) => {
                    activation.granted.push(text.clone());
                    rules.push(rule);
                }
                Err(err) => activation.notes.push(bad_rule(skill, text, &err)),
            }
        }
        let mut sessions = self.sessions();
        let held = sessions.entry(session_id.to_owned()).or_default();
        for rule in rules {
            if !held.iter().any(|granted| granted.rule == rule) {
                held.push(Granted {
                    skill: skill.name.clone(),
                    rule,
                });
            }
        }
        activation
    }

    /// The skill whose grant covers calling `tool` with `input` in session `session_id`, if
    /// one does. A command is covered only if all of it is (every sub-command), as allow
    /// rules are applied.
    pub fn covering(&self, session_id: &str, tool: &str, input: &Value) -> Option<String> {
        self.sessions().get(session_id).and_then(|held| {
            held.iter()
                .find(|granted| granted.rule.matches(tool, input, &self.context))
                .map(|granted| granted.skill.clone())
        })
    }

    /// The rules session `session_id` holds, as written, with the skill of each.
    pub fn granted(&self, session_id: &str) -> Vec<(String, String)> {
        self.sessions()
            .get(session_id)
            .map(|held| {
                held.iter()
                    .map(|granted| (granted.skill.clone(), granted.rule.to_string()))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn sessions(&self) -> MutexGuard<'_, HashMap<String, Vec<Granted>>> {
        // Entries are pushed whole: a poisoned lock is still good.
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The note on an `allowed-tools` entry that is not a permission rule.
fn bad_rule(skill: &SkillSummary, text: &str, err: &impl std::fmt::Display) -> String {
    format!(
        "skill `{}` ({}): the allowed-tools entry `{text}` is ignored: {err}",
        skill.name,
        skill.path.display()
    )
}

/// `dir` with links resolved, or as given when it cannot be (it does not exist).
fn canonical(dir: &Path) -> PathBuf {
    dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf())
}

/// The host's approver, with the sessions' skill grants: a call asked about only for what it
/// would do runs without asking when a skill the session used grants it
/// ([`Approver::grants`]). Everything else is the host's approver's.
#[derive(Clone)]
pub struct GrantingApprover {
    inner: Arc<dyn Approver>,
    grants: Arc<SkillGrants>,
}

impl std::fmt::Debug for GrantingApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrantingApprover")
            .field("grants", &self.grants)
            .finish_non_exhaustive()
    }
}

impl GrantingApprover {
    /// `inner` with `grants`.
    pub fn new(inner: Arc<dyn Approver>, grants: Arc<SkillGrants>) -> Self {
        Self { inner, grants }
    }

    /// The grants it consults.
    pub fn grants(&self) -> &Arc<SkillGrants> {
        &self.grants
    }
}

#[async_trait::async_trait]
impl Approver for GrantingApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        self.inner.approve(request).await
    }

    async fn continue_after_warning(&self, used: u32, limit: u32) -> bool {
        self.inner.continue_after_warning(used, limit).await
    }

    fn allows_unattended(&self) -> bool {
        self.inner.allows_unattended()
    }

    fn refuses_changes(&self) -> Option<String> {
        self.inner.refuses_changes()
    }

    fn asks_about_changes(&self) -> bool {
        self.inner.asks_about_changes()
    }

    fn grants(&self, session_id: &str, request: &ApprovalRequest) -> bool {
        // The engine never asks for a protected call; refused here all the same.
        if request.is_protected() {
            return false;
        }
        if let Some(skill) = self
            .grants
            .covering(session_id, &request.tool, &request.input)
        {
            tracing::debug!(tool = %request.tool, %skill, "allowed by the skill's allowed-tools");
            return true;
        }
        self.inner.grants(session_id, request)
    }
}
