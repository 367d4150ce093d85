//! An `Issue`: one located reason a document, a run's inputs or a submission was refused.

use std::fmt;

/// One problem found while checking something a caller sent, with where it was found.
///
/// `path` uses the protocol's notation: dotted object keys and `[n]` list indexes counted from 0,
/// for example `steps[3].next` or `output.cleared`. An empty path means the whole document.
/// Renders as `path: message`, the exact text the protocol's `issues` arrays carry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Issue {
    pub path: String,
    pub message: String,
}

impl Issue {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Issue {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Builds the path of a child object key: `child("steps[0]", "next")` is `steps[0].next`.
pub fn child(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// Builds the path of a list element: `index("steps", 3)` is `steps[3]`.
pub fn index(parent: &str, position: usize) -> String {
    format!("{parent}[{position}]")
}
