//! Skills: instructions for a kind of task, written in Markdown, listed in the system prompt by
//! name and description and read in full only when the model asks for one with `use_skill`.
//!
//! A skill is `<dir>/<name>/SKILL.md` (the folder may hold scripts and references too) or
//! `<dir>/<name>.md`, in `.keel/skills/` and `.claude/skills/` of the project, in
//! `$KEEL_HOME/skills/` and (with [`SkillIndex::standard_dirs_with_claude`]) in Claude Code's
//! `~/.claude/skills/`, searched in that order: the first folder to define a name wins.
//! Claude Code's `allowed-tools` is read and exposed ([`SkillSummary::allowed_tools`]) and
//! granted only as the host says: with [`SkillGrants`] given to
//! [`UseSkillTool::with_grants`] and the host's approver wrapped in a [`GrantingApprover`],
//! once a session has used a skill from a folder the host trusts (the user's own; the
//! project's only when the person trusts the project), calls its `allowed-tools` rules cover
//! run without asking for the rest of that session. Claude Code honours them "while the skill
//! is active"; keel has no end to a skill's use, so the session is the honest equivalent (a
//! new session, `/clear` included, starts without; grants are kept in memory, so a session
//! resumed by another process starts without too). Deny rules, ask rules, hooks that ask or
//! refuse, protected paths (`.git`, configuration) and read-only modes still win. A
//! sub-agent's session is granted nothing by its parent's skills, nor by the skills it uses or
//! preloads itself (its `use_skill` records nothing). An entry that is not a permission rule
//! is ignored with a warning ([`SkillGrants::check`]).
//! Front matter is optional:
//!
//! ```markdown
//! ---
//! name: release
//! description: Cut a release - version bump, changelog, tag.
//! triggers: [release, publish a version]
//! ---
//! The instructions, read only when the skill is used.
//! ```
//!
//! Without front matter (or without `name` / `description` in it) the name is the folder's or
//! the file's name and the description the body's first paragraph, on one line and cut to
//! about 200 characters. README, CHANGELOG and LICENSE files and `drafts/` folders are not
//! skills. A skill file reached through a symlink whose target lies outside its skills
//! folder (a linked file, or a linked skill folder) is skipped with a warning naming it, and
//! checked again when it is loaded. Indexing reads only the front matter (or up to the end of the first paragraph);
//! [`SkillIndex::load`] reads a body the first time it is asked for and keeps it.

mod grants;
mod scan;
mod tool;

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::error::AgentsError;
use crate::frontmatter;

pub use grants::{Activation, GrantingApprover, SkillGrants};
pub use tool::{UseSkillArgs, UseSkillTool};

/// What the index knows of a skill before it is used.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SkillSummary {
    /// The name `use_skill` takes.
    pub name: String,
    /// When to use it, on one line.
    pub description: String,
    /// Words or phrases of tasks it fits (front matter `triggers`); often empty.
    pub triggers: Vec<String>,
    /// The Markdown file (`SKILL.md` for a folder skill).
    pub path: PathBuf,
    /// Whether the skill is a folder (`<name>/SKILL.md`) that may hold other files.
    pub in_folder: bool,
    /// The skills folder it was found in: its file must resolve inside it.
    skills_dir: PathBuf,
    /// Claude Code's `allowed-tools`, as written.
    allowed_tools: Option<Vec<String>>,
}

impl SkillSummary {
    /// The skill's folder, for a folder skill: paths its instructions mention are relative to
    /// it.
    pub fn folder(&self) -> Option<&Path> {
        if self.in_folder {
            self.path.parent()
        } else {
            None
        }
    }

    /// Claude Code's `allowed-tools` of the skill, as written (`Read`, `Bash(git add:*)`,
    /// `mcp__server__tool`; a comma- or space-separated text or a YAML list): the tools
    /// Claude Code lets the skill use without asking while it is in use. `None` when the
    /// skill names none.
    ///
    /// keel grants nothing by itself: the host decides ([`SkillGrants`]). A skill from a
    /// project's folder (see [`skills_dir`](Self::skills_dir)) is the repository's word, so
    /// its `allowed-tools` should be honoured only when the person trusts the project; a
    /// user's own skills (`$KEEL_HOME/skills`, `~/.claude/skills`) are theirs. `use_skill`
    /// reports the list in its result's metadata (`allowed_tools`), with what it granted
    /// (`granted`) and why not (`notes`).
    pub fn allowed_tools(&self) -> Option<&[String]> {
        self.allowed_tools.as_deref()
    }

    /// The skills folder the skill was found in (one of those given to
    /// [`SkillIndex::discover`]): whether it is the project's or the user's says whether its
    /// [`allowed_tools`](Self::allowed_tools) may be honoured.
    pub fn skills_dir(&self) -> &Path {
        &self.skills_dir
    }

    /// The skill's line in [`SkillIndex::prompt_section`]: `- name: description`, then
    /// ` (when: a, b)` if it has triggers.
    pub fn prompt_line(&self) -> String {
        let mut line = format!("- {}: {}", self.name, self.description);
        if !self.triggers.is_empty() {
            let _ = write!(line, " (when: {})", self.triggers.join(", "));
        }
        line
    }
}

/// The skills an agent may use: found once, their front matter read, their bodies read on
/// first use and kept. Share it behind an `Arc`.
#[derive(Default)]
pub struct SkillIndex {
    /// Sorted by name; names are unique.
    skills: Vec<SkillSummary>,
    /// Bodies already read, by name.
    bodies: Mutex<HashMap<String, String>>,
}

impl fmt::Debug for SkillIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut loaded: Vec<String> = self.bodies().keys().cloned().collect();
        loaded.sort();
        f.debug_struct("SkillIndex")
            .field("skills", &self.names().collect::<Vec<_>>())
            .field("loaded", &loaded)
            .finish()
    }
}

/// The heading and the lines that say what skills are and how to use them.
const PROMPT_HEADER: &str = "# Skills\n\
Skills hold instructions for particular kinds of task. When your task matches a skill below, \
load its instructions with the use_skill tool (give the skill's name) before you start, and \
follow them.\n";

impl SkillIndex {
    /// The skills folders to search, in order: `<project_root>/.keel/skills`,
    /// `<project_root>/.claude/skills`, then `<keel_home>/skills` if there is a keel home.
    pub fn standard_dirs(project_root: &Path, keel_home: Option<&Path>) -> Vec<PathBuf> {
        Self::standard_dirs_with_claude(project_root, keel_home, None)
    }

    /// [`standard_dirs`](Self::standard_dirs), then Claude Code's user folder's `skills`
    /// (`~/.claude/skills/<name>/SKILL.md`; see [`claude_user_dir`](crate::claude_user_dir)).
    pub fn standard_dirs_with_claude(
        project_root: &Path,
        keel_home: Option<&Path>,
        claude_home: Option<&Path>,
    ) -> Vec<PathBuf> {
        crate::frontmatter::standard_dirs("skills", project_root, keel_home, claude_home)
    }

    /// Finds the skills in `dirs` (missing folders have none) and reads each one's front
    /// matter. Returns the index and warnings, each naming the file or folder it is about: a
    /// file that cannot be used, or resolves outside its skills folder (through a symlink), is
    /// skipped; a name defined in an earlier folder shadows the same name in a later one.
    /// Warnings are logged with `tracing` too.
    pub fn discover(dirs: &[PathBuf]) -> (SkillIndex, Vec<String>) {
        let mut warnings = Vec::new();
        let mut skills: Vec<SkillSummary> = Vec::new();
        let mut by_name: HashMap<String, usize> = HashMap::new();
        let mut seen_dirs: Vec<PathBuf> = Vec::new();
        for dir in dirs {
            // The same folder twice (the project is $KEEL_HOME's parent): search it once.
            let canonical = dir.canonicalize().unwrap_or_else(|_| dir.clone());
            if seen_dirs.contains(&canonical) {
                continue;
            }
            seen_dirs.push(canonical);
            for candidate in scan::candidates(dir, &mut warnings) {
                let head = frontmatter::check_inside(dir, &candidate.path)
                    .and_then(|()| scan::read_head(&candidate.path, &candidate.name));
                let head = match head {
                    Ok(head) => head,
                    Err(err) => {
                        warnings.push(format!("skill skipped: {err}"));
                        continue;
                    }
                };
                if let Some(&winner) = by_name.get(&head.name) {
                    let winner: &SkillSummary = &skills[winner];
                    warnings.push(format!(
                        "skill `{}` in {} is shadowed by the one in {}",
                        head.name,
                        candidate.path.display(),
                        winner.path.display()
                    ));
                    continue;
                }
                by_name.insert(head.name.clone(), skills.len());
                skills.push(SkillSummary {
                    name: head.name,
                    description: head.description,
                    triggers: head.triggers,
                    path: candidate.path,
                    in_folder: candidate.layout == scan::Layout::Folder,
                    skills_dir: dir.clone(),
                    allowed_tools: head.allowed_tools,
                });
            }
        }
        for warning in &warnings {
            tracing::warn!("{warning}");
        }
        skills.sort_by(|a, b| a.name.cmp(&b.name));
        let index = SkillIndex {
            skills,
            bodies: Mutex::new(HashMap::new()),
        };
        (index, warnings)
    }

    /// The skills, sorted by name.
    pub fn skills(&self) -> &[SkillSummary] {
        &self.skills
    }

    /// The skills' names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.skills.iter().map(|skill| skill.name.as_str())
    }

    /// The skill called `name`.
    pub fn get(&self, name: &str) -> Option<&SkillSummary> {
        self.skills
            .binary_search_by(|skill| skill.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.skills[i])
    }

    /// How many skills there are.
    pub fn len(&self) -> usize {
        self.skills.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// The text to append to the system prompt: a `# Skills` heading, a line on how skills
    /// are used, and one line per skill (see [`SkillSummary::prompt_line`]). `None` when there
    /// are no skills.
    pub fn prompt_section(&self) -> Option<String> {
        if self.skills.is_empty() {
            return None;
        }
        let mut section = String::from(PROMPT_HEADER);
        section.push('\n');
        for skill in &self.skills {
            section.push_str(&skill.prompt_line());
            section.push('\n');
        }
        Some(section)
    }

    /// The instructions of skill `name`: its body, without the front matter. The file is read
    /// the first time and the body kept; later calls do not read it again. Fails if there is
    /// no such skill (the error lists the known ones), the file now resolves outside its
    /// skills folder, or it cannot be read or parsed.
    pub fn load(&self, name: &str) -> Result<String, AgentsError> {
        let Some(skill) = self.get(name) else {
            return Err(AgentsError::not_found("skill", name, self.names()));
        };
        if let Some(body) = self.bodies().get(name) {
            return Ok(body.clone());
        }
        // Read without holding the lock; if two calls race, the first body stored is kept.
        // The file may have been replaced by a link out since it was found: checked again.
        frontmatter::check_inside(&skill.skills_dir, &skill.path)?;
        let body = read_body(&skill.path)?;
        Ok(self.bodies().entry(name.to_owned()).or_insert(body).clone())
    }

    /// Whether skill `name`'s body has been read.
    pub fn is_loaded(&self, name: &str) -> bool {
        self.bodies().contains_key(name)
    }

    fn bodies(&self) -> MutexGuard<'_, HashMap<String, String>> {
        // The map is never left half-updated, so a poisoned lock is still good.
        self.bodies.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Reads a skill file whole and returns its body.
fn read_body(path: &Path) -> Result<String, AgentsError> {
    let bytes = std::fs::read(path).map_err(|err| AgentsError::io(path, err))?;
    let text = String::from_utf8(bytes).map_err(|err| AgentsError::Invalid {
        path: path.to_path_buf(),
        reason: format!(
            "the file is not UTF-8 text (the first invalid byte is at offset {})",
            err.utf8_error().valid_up_to()
        ),
    })?;
    let document = frontmatter::parse::<serde::de::IgnoredAny>(path, &text)?;
    Ok(document.body)
}
