//! The registry: the tools an agent may call, and a dispatch that never fails the loop.

use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use keel_provider::{ToolCall, ToolDefinition, ToolInput, json_kind};
use tracing::Instrument;

use crate::context::ToolContext;
use crate::effect::Effect;
use crate::error::RegistryError;
use crate::output::{DEFAULT_OUTPUT_LIMIT, ToolOutput, limit_images, limit_output};
use crate::schema::validate_definition;
use crate::source::ToolSource;
use crate::tool::{CallFailure, DynTool, Tool};

/// How long a call may run when neither the tool nor the registry says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Clone)]
struct Entry {
    tool: Arc<dyn DynTool>,
    definition: ToolDefinition,
}

/// The tools an agent may call, by name: its own, and those its [`ToolSource`]s offer now.
///
/// [`definitions`](Self::definitions) come sorted by name, so prompts are cacheable and
/// snapshots deterministic. [`dispatch`](Self::dispatch) turns every failure (unknown tool,
/// bad arguments, a call cut off, a panic, a timeout, cancellation) into an error result the
/// model can read.
#[derive(Clone)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Entry>,
    sources: Vec<Arc<dyn ToolSource>>,
    default_timeout: Duration,
    timeouts: HashMap<String, Duration>,
    output_limit: usize,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .field(
                "sources",
                &self.sources.iter().map(|s| s.name()).collect::<Vec<_>>(),
            )
            .field("default_timeout", &self.default_timeout)
            .field("timeouts", &self.timeouts)
            .field("output_limit", &self.output_limit)
            .finish()
    }
}

impl Default for ToolRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl ToolRegistry {
    /// An empty registry: 10-minute timeout, 30,000-character output limit.
    pub fn new() -> Self {
        Self {
            tools: BTreeMap::new(),
            sources: Vec::new(),
            default_timeout: DEFAULT_TIMEOUT,
            timeouts: HashMap::new(),
            output_limit: DEFAULT_OUTPUT_LIMIT,
        }
    }

    /// Adds `tool`, builder style.
    pub fn with<T: Tool>(mut self, tool: T) -> Result<Self, RegistryError> {
        self.register(tool)?;
        Ok(self)
    }

    /// Adds `tool`. Fails if the name is taken or the definition breaks a provider rule.
    pub fn register<T: Tool>(&mut self, tool: T) -> Result<(), RegistryError> {
        self.register_dyn(Arc::new(tool))
    }

    /// Adds an already erased tool.
    pub fn register_dyn(&mut self, tool: Arc<dyn DynTool>) -> Result<(), RegistryError> {
        let definition = tool.definition();
        if self.tools.contains_key(&definition.name) {
            return Err(RegistryError::Duplicate(definition.name));
        }
        validate_definition(&definition).map_err(|reason| RegistryError::InvalidDefinition {
            name: definition.name.clone(),
            reason,
        })?;
        self.tools
            .insert(definition.name.clone(), Entry { tool, definition });
        Ok(())
    }

    /// Moves every tool and source of `other` into this registry, with the per-tool timeouts
    /// `other` set for them (this registry's default timeout and output limit stay). Fails with
    /// [`RegistryError::Duplicate`] naming the first clash, in name order, and then adds
    /// nothing.
    ///
    /// ```
    /// # use keel_tool::ToolRegistry;
    /// let mut mine = ToolRegistry::new();
    /// mine.extend(ToolRegistry::new())?;
    /// assert!(mine.is_empty());
    /// # Ok::<(), keel_tool::RegistryError>(())
    /// ```
    pub fn extend(&mut self, other: ToolRegistry) -> Result<(), RegistryError> {
        if let Some(name) = other
            .tools
            .keys()
            .find(|name| self.tools.contains_key(*name))
        {
            return Err(RegistryError::Duplicate(name.clone()));
        }
        let ToolRegistry {
            tools,
            timeouts,
            sources,
            ..
        } = other;
        self.sources.extend(sources);
        for (name, timeout) in timeouts {
            if tools.contains_key(&name) {
                self.timeouts.insert(name, timeout);
            }
        }
        self.tools.extend(tools);
        Ok(())
    }

    /// Removes the tool called `name`, returning it.
    pub fn remove(&mut self, name: &str) -> Option<Arc<dyn DynTool>> {
        self.timeouts.remove(name);
        self.tools.remove(name).map(|entry| entry.tool)
    }

    /// Adds a source of tools that may change while the agent runs (an MCP server's). Its
    /// tools are offered after this registry's own: one whose name is taken, or whose
    /// definition breaks a provider rule, is left out (and logged).
    pub fn add_source(&mut self, source: Arc<dyn ToolSource>) {
        self.sources.push(source);
    }

    /// The sources added with [`add_source`](Self::add_source).
    pub fn sources(&self) -> &[Arc<dyn ToolSource>] {
        &self.sources
    }

    /// Brings every source's tools up to date; the engine runs it before each model request.
    pub async fn refresh_sources(&self) {
        futures::future::join_all(self.sources.iter().map(|source| source.refresh())).await;
    }

    /// The tools the sources offer now, each with its definition, in the order offered,
    /// without those whose name is taken or whose definition is invalid.
    fn source_entries(&self) -> Vec<Entry> {
        let mut seen: Vec<Entry> = Vec::new();
        for source in &self.sources {
            for tool in source.tools() {
                let definition = tool.definition();
                if self.tools.contains_key(&definition.name)
                    || seen.iter().any(|e| e.definition.name == definition.name)
                {
                    tracing::warn!(
                        source = source.name(),
                        tool = definition.name,
                        "a tool of this name is already offered; this one is left out"
                    );
                    continue;
                }
                if let Err(reason) = validate_definition(&definition) {
                    tracing::warn!(
                        source = source.name(),
                        tool = definition.name,
                        reason,
                        "an invalid tool definition is left out"
                    );
                    continue;
                }
                seen.push(Entry { tool, definition });
            }
        }
        seen
    }

    /// The tool called `name`: one of this registry's own, else the first tool of that name
    /// with a valid definition a source offers now (the one [`definitions`](Self::definitions)
    /// offers). Only tools of that name have their definition made and checked; nothing is
    /// cloned but `Arc`s.
    fn lookup(&self, name: &str) -> Option<Arc<dyn DynTool>> {
        if let Some(entry) = self.tools.get(name) {
            return Some(entry.tool.clone());
        }
        self.sources
            .iter()
            .flat_map(|source| source.tools())
            .find(|tool| {
                tool.name() == name && {
                    let definition = tool.definition();
                    definition.name == name && validate_definition(&definition).is_ok()
                }
            })
    }

    /// The tool called `name` (its own or a source's).
    pub fn get(&self, name: &str) -> Option<Arc<dyn DynTool>> {
        self.lookup(name)
    }

    /// The names of this registry's own tools, sorted (not the sources'; see
    /// [`definitions`](Self::definitions)).
    pub fn names(&self) -> Vec<&str> {
        self.tools.keys().map(String::as_str).collect()
    }

    /// How many tools of its own there are.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are no tools of its own and no sources.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.sources.is_empty()
    }

    /// The definitions to send to the model, its own tools' and the sources' current ones,
    /// sorted by name.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        let mut definitions: Vec<ToolDefinition> = self
            .tools
            .values()
            .map(|entry| entry.definition.clone())
            .collect();
        if !self.sources.is_empty() {
            definitions.extend(
                self.source_entries()
                    .into_iter()
                    .map(|entry| entry.definition),
            );
            definitions.sort_by(|a, b| a.name.cmp(&b.name));
        }
        definitions
    }

    /// A registry with only the tools named in `names` that this one has (the intersection;
    /// a source's tools by their current names too), and the same settings.
    pub fn subset(&self, names: &[&str]) -> Self {
        let tools = self
            .tools
            .iter()
            .filter(|(name, _)| names.contains(&name.as_str()))
            .map(|(name, entry)| (name.clone(), entry.clone()))
            .collect();
        let kept: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let sources = self
            .sources
            .iter()
            .map(|source| {
                Arc::new(Narrowed {
                    source: source.clone(),
                    names: kept.clone(),
                }) as Arc<dyn ToolSource>
            })
            .collect();
        Self {
            tools,
            sources,
            ..self.clone()
        }
    }

    /// Sets how long a call may run when its tool names no timeout of its own.
    pub fn with_default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout;
        self
    }

    /// Sets how long calls of tool `name` may run, overriding the tool's own timeout.
    pub fn with_timeout(mut self, name: &str, timeout: Duration) -> Self {
        self.timeouts.insert(name.to_owned(), timeout);
        self
    }

    /// Sets the most characters of one result the model sees (default 30,000).
    pub fn with_output_limit(mut self, chars: usize) -> Self {
        self.output_limit = chars;
        self
    }

    /// What `call` would do. Calls that will not run (unknown tool, invalid or unparseable
    /// input) are `ReadOnly`.
    pub fn effect(&self, call: ToolCall<'_>) -> Effect {
        let (Some(tool), ToolInput::Valid(input)) = (self.lookup(call.name), call.input) else {
            return Effect::ReadOnly;
        };
        std::panic::catch_unwind(AssertUnwindSafe(|| tool.effect(input))).unwrap_or_else(|_| {
            tracing::error!(tool = call.name, "the tool's effect() panicked");
            Effect::Mutating
        })
    }

    fn timeout_for(&self, name: &str, tool: &dyn DynTool) -> Duration {
        self.timeouts
            .get(name)
            .copied()
            .or_else(|| tool.timeout())
            .unwrap_or(self.default_timeout)
    }

    /// Runs `call`. Never fails and never panics: every problem becomes an error result.
    pub async fn dispatch(&self, call: ToolCall<'_>, ctx: &ToolContext) -> ToolOutput {
        let span = tracing::info_span!("tool_call", tool = call.name, id = call.id);
        let mut output = self.run(call, ctx).instrument(span).await;
        limit_output(
            &mut output.content,
            self.output_limit,
            ctx.scratch_dir(),
            &format!("{}-{}", call.name, call.id),
        );
        // After the text limit, so the notes about dropped images are never cut.
        limit_images(&mut output);
        output
    }

    async fn run(&self, call: ToolCall<'_>, ctx: &ToolContext) -> ToolOutput {
        let name = call.name;
        let Some(tool) = self.lookup(name) else {
            return ToolOutput::error(self.unknown_tool(name));
        };
        let input = match call.input {
            ToolInput::Valid(input) => input,
            ToolInput::Invalid(bad) => {
                return ToolOutput::error(format!(
                    "your call to {name} was cut off before its input was complete ({}), so \
                     nothing was run; resend the whole call",
                    bad.reason
                ));
            }
        };
        if !input.is_object() {
            return ToolOutput::error(format!(
                "invalid arguments for {name}: the arguments must be a JSON object, got {}",
                json_kind(input)
            ));
        }
        if ctx.is_cancelled() {
            return ToolOutput::error("interrupted by the user");
        }
        let ctx = ctx.for_call(call.id, name);
        let timeout = self.timeout_for(name, tool.as_ref());
        let running = AssertUnwindSafe(tool.call_json(input, &ctx)).catch_unwind();
        let outcome = tokio::select! {
            biased;
            () = ctx.cancel().cancelled() => return ToolOutput::error("interrupted by the user"),
            outcome = tokio::time::timeout(timeout, running) => outcome,
        };
        match outcome {
            Err(_) => ToolOutput::error(format!(
                "tool {name} timed out after {}s and was stopped",
                timeout.as_secs_f64()
            )),
            Ok(Err(panic)) => {
                tracing::error!(tool = name, panic = panic_message(&*panic), "tool panicked");
                ToolOutput::error(format!("tool {name} failed internally"))
            }
            Ok(Ok(Err(CallFailure::Arguments(reason)))) => {
                ToolOutput::error(format!("invalid arguments for {name}: {reason}"))
            }
            Ok(Ok(Err(CallFailure::Tool(err)))) => ToolOutput::error(err.to_string()),
            Ok(Ok(Ok(output))) => output,
        }
    }

    fn unknown_tool(&self, name: &str) -> String {
        let names: Vec<String> = self.definitions().into_iter().map(|d| d.name).collect();
        if names.is_empty() {
            return format!("unknown tool {name:?}: no tools are available");
        }
        format!(
            "unknown tool {name:?}; the available tools are: {}",
            names.join(", ")
        )
    }
}

/// A source seen through [`ToolRegistry::subset`]: only the tools of the given names.
struct Narrowed {
    source: Arc<dyn ToolSource>,
    names: Vec<String>,
}

#[async_trait::async_trait]
impl ToolSource for Narrowed {
    fn name(&self) -> &str {
        self.source.name()
    }

    fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        let mut tools = self.source.tools();
        tools.retain(|tool| self.names.iter().any(|name| name == tool.name()));
        tools
    }

    async fn refresh(&self) {
        self.source.refresh().await;
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(a non-string panic payload)")
}
