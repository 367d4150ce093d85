//! The ids every layer passes around: organizations, runs and steps, as types of their own.
//!
//! Each is its text and nothing more: it serializes as a plain string (`#[serde(transparent)]`),
//! so stored records, keys, fingerprints and the wire read exactly as they did when ids were
//! strings. The types keep one kind of id from standing in for another; they make no promise
//! about the text, but for a step id a process declares (see [`StepId::new`]).
//!
//! Build them where text comes in (a tool's arguments, a parsed key, a token) and pass them on;
//! a run id a client sends is just text until the run service looks it up, so a malformed one
//! answers exactly as an unknown one does.

use serde::{Deserialize, Serialize};
use std::borrow::Borrow;
use std::fmt;

macro_rules! text_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        /// Maps keyed by the id can be looked up with its text.
        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }
    };
}

text_id! {
    /// An organization: the tenant every run, process and record belongs to, as the identity
    /// provider names it.
    OrgId
}

text_id! {
    /// A run, as the server minted it (`r_` and hex) or as a caller spelled it: a run id that
    /// names no run of the caller's organization is `not_found`, whatever its text.
    RunId
}

text_id! {
    /// A step of a process. A step id a process declares matches `^[a-z][a-z0-9_-]{0,63}$`
    /// (built with [`StepId::new`], which checks); one a caller names (a `claim`'s `stepId`) or a
    /// stored key holds is kept as spelled ([`StepId::from_wire`]) and may name no step.
    /// Also the pattern of event names.
    StepId
}

impl From<String> for OrgId {
    fn from(text: String) -> Self {
        OrgId(text)
    }
}

impl From<&str> for OrgId {
    fn from(text: &str) -> Self {
        OrgId(text.to_string())
    }
}

impl From<String> for RunId {
    fn from(text: String) -> Self {
        RunId(text)
    }
}

impl From<&str> for RunId {
    fn from(text: &str) -> Self {
        RunId(text.to_string())
    }
}

impl StepId {
    /// A step id as a process declares it; `None` when the text breaks the step id pattern.
    pub fn new(id: &str) -> Option<Self> {
        is_step_id(id).then(|| StepId(id.to_string()))
    }

    /// A step id as a request or a stored key spells it, unchecked: it may name no step, and
    /// the run that looks it up answers for that.
    pub fn from_wire(text: impl Into<String>) -> Self {
        StepId(text.into())
    }
}

/// Whether `id` matches the step id pattern `^[a-z][a-z0-9_-]{0,63}$` (spec §2.3), which event
/// names follow too.
pub fn is_step_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_lowercase()
        && bytes[1..]
            .iter()
            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn an_id_serializes_as_its_text() {
        let run = RunId::from("r_8f2");
        assert_eq!(serde_json::to_string(&run).unwrap(), "\"r_8f2\"");
        assert_eq!(serde_json::from_str::<RunId>("\"r_8f2\"").unwrap(), run);
        assert_eq!(run.to_string(), "r_8f2");
        assert_eq!(run, "r_8f2");
    }

    #[test]
    fn maps_keyed_by_an_id_look_up_by_text() {
        let mut runs = HashMap::new();
        runs.insert(RunId::from("r_1"), 1);
        assert_eq!(runs.get("r_1"), Some(&1));
    }

    #[test]
    fn only_a_declared_step_id_is_checked() {
        assert_eq!(
            StepId::new("review").map(StepId::into_string),
            Some("review".into())
        );
        assert_eq!(StepId::new("Review"), None);
        assert_eq!(StepId::from_wire("Review").as_str(), "Review");
    }
}
