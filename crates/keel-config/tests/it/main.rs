//! keel-config integration tests.
#![allow(clippy::too_many_lines)]
