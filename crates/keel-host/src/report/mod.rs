//! What a front end shows about a session, as lines of text (made printable: nothing from a
//! file, a server or the model can put a control character on a terminal): its status and
//! context, what it can delegate to, its MCP servers, the notes at start about its tools and
//! window, and the verdict on a model the person chose.

pub mod delegates;
pub mod mcp;
pub mod model;
pub mod notes;
pub mod status;
