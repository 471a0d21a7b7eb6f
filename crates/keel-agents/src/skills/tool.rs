//! The `use_skill` tool: the model asks for a skill by name and reads its instructions.

use std::fmt::Write as _;
use std::sync::Arc;

use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{SkillGrants, SkillIndex};

/// The tool's description: nothing in it depends on which skills exist, so the tool
/// definitions stay the same from session to session (and cacheable).
const DESCRIPTION: &str = "Loads a skill: instructions for a particular kind of task. The \
available skills are listed by name in the system prompt under \"Skills\", each with what it \
is for. When your task matches one, call this with the skill's name before you start, then \
follow the instructions it returns. Reads nothing but the skill.";

/// The arguments of `use_skill`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct UseSkillArgs {
    /// The skill's name, as listed in the system prompt.
    pub name: String,
}

/// `use_skill { name }`: returns a skill's instructions, under a `# Skill: <name>` line. An
/// unknown name is an error result listing the skills there are. Read-only.
///
/// With [`SkillGrants`] ([`with_grants`](Self::with_grants)), using a skill grants its
/// `allowed-tools` to the session for the rest of it ([`SkillGrants::activate`]); the result
/// says what was granted, or why nothing was.
#[derive(Debug, Clone)]
pub struct UseSkillTool {
    index: Arc<SkillIndex>,
    grants: Option<Arc<SkillGrants>>,
}

impl UseSkillTool {
    /// The tool over `index`; it grants nothing.
    pub fn new(index: Arc<SkillIndex>) -> Self {
        Self {
            index,
            grants: None,
        }
    }

    /// Records the `allowed-tools` of each skill used in `grants`, for the session that used
    /// it (the skill as `index` read it from its file, looked up by name: nothing the model
    /// writes is a rule).
    #[must_use]
    pub fn with_grants(mut self, grants: Arc<SkillGrants>) -> Self {
        self.grants = Some(grants);
        self
    }

    /// The skills it serves.
    pub fn index(&self) -> &Arc<SkillIndex> {
        &self.index
    }

    /// The skill `asked` means: the exact name, else the one name equal to it ignoring case
    /// and surrounding spaces.
    fn resolve(&self, asked: &str) -> String {
        let asked = asked.trim();
        if self.index.get(asked).is_some() {
            return asked.to_owned();
        }
        let mut matches = self
            .index
            .names()
            .filter(|name| name.eq_ignore_ascii_case(asked));
        match (matches.next(), matches.next()) {
            (Some(name), None) => name.to_owned(),
            _ => asked.to_owned(),
        }
    }
}

impl From<Arc<SkillIndex>> for UseSkillTool {
    fn from(index: Arc<SkillIndex>) -> Self {
        Self::new(index)
    }
}

impl Tool for UseSkillTool {
    type Args = UseSkillArgs;
    const NAME: &'static str = "use_skill";

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn effect(&self, _args: &UseSkillArgs) -> Effect {
        Effect::ReadOnly
    }

    async fn call(&self, args: UseSkillArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let name = self.resolve(&args.name);
        let index = Arc::clone(&self.index);
        let body = if index.is_loaded(&name) {
            index.load(&name)
        } else {
            // The first load reads a file: keep it off the async workers.
            let owned = name.clone();
            tokio::task::spawn_blocking(move || index.load(&owned))
                .await
                .map_err(|err| ToolError::failed(format!("loading skill `{name}` failed: {err}")))?
        }
        .map_err(|err| ToolError::failed(err.to_string()))?;
        let Some(skill) = self.index.get(&name) else {
            return Err(ToolError::failed(format!("no skill named `{name}`")));
        };
        let mut content = format!("# Skill: {name}\n");
        if let Some(folder) = skill.folder() {
            let _ = writeln!(
                content,
                "(The skill's folder is {}; files these instructions mention are there.)",
                folder.display()
            );
        }
        let activation = self
            .grants
            .as_ref()
            .map(|grants| grants.activate(ctx.session_id(), skill))
            .unwrap_or_default();
        if !activation.granted.is_empty() {
            let _ = writeln!(
                content,
                "(For the rest of this session these run without asking for approval: {}.)",
                activation.granted.join(", ")
            );
        }
        for note in &activation.notes {
            let _ = writeln!(content, "(Note: {note}.)");
        }
        content.push('\n');
        if body.is_empty() {
            content.push_str("(This skill has no instructions beyond its description.)\n");
        } else {
            content.push_str(&body);
            content.push('\n');
        }
        Ok(ToolOutput::text(content).with_metadata(json!({
            "skill": name,
            "path": skill.path.display().to_string(),
            "allowed_tools": skill.allowed_tools(),
            "granted": activation.granted,
            "notes": activation.notes,
        })))
    }
}
