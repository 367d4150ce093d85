//! What every edge speaks of tools (MCP, the admin API, the console): their names, the schemas
//! of their arguments and results, and their outcomes and errors.

pub mod names;
pub mod result;
pub mod schemas;

pub use names::{ToolName, UnknownTool};
pub use result::{ErrorCode, ToolData, ToolError, ToolResult};
