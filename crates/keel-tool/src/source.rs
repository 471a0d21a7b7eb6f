//! Tools that come and go while an agent runs: a [`ToolSource`] the registry asks before each
//! model request (the tools of an MCP server, which may change its list at any time).

use std::sync::Arc;

use crate::tool::DynTool;

/// A set of tools that may change between model requests, such as the tools of a connected
/// MCP server. A [`ToolRegistry`](crate::ToolRegistry) that holds a source offers its
/// current tools beside its own: [`refresh`](Self::refresh) runs before each model request,
/// then [`tools`](Self::tools) is what the model sees and may call.
///
/// ```
/// use std::sync::Arc;
/// use keel_tool::{DynTool, ToolRegistry, ToolSource};
///
/// struct Nothing;
///
/// #[async_trait::async_trait]
/// impl ToolSource for Nothing {
///     fn name(&self) -> &str {
///         "nothing"
///     }
///     fn tools(&self) -> Vec<Arc<dyn DynTool>> {
///         Vec::new()
///     }
/// }
///
/// let mut registry = ToolRegistry::new();
/// registry.add_source(Arc::new(Nothing));
/// assert!(registry.definitions().is_empty());
/// ```
#[async_trait::async_trait]
pub trait ToolSource: Send + Sync + 'static {
    /// A short name for messages (the server's name).
    fn name(&self) -> &str;

    /// The tools offered now. Each must have a valid definition (see
    /// [`validate_definition`](crate::validate_definition)); a tool whose name the registry
    /// already has, or another source offered first, is not offered.
    fn tools(&self) -> Vec<Arc<dyn DynTool>>;

    /// Brings [`tools`](Self::tools) up to date (a changed list fetched again). Runs before
    /// each model request; it must not take long (bound any waiting it does).
    async fn refresh(&self) {}
}
