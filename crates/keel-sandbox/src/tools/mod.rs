//! The built-in tools. Names and arguments are a public contract: keep them exactly.

// File tools.

// Search tools.
mod glob;
mod grep;
mod list_directory;
pub use glob::{Glob, GlobArgs};
pub use grep::{Grep, GrepArgs};
pub use list_directory::{ListDirectory, ListDirectoryArgs};

// Command tools.

// Git tools.
