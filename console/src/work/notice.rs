//! The notice of a decision this session just made: carried from the work item page to the inbox
//! in a one-time flash.

use super::Decision;
use serde_json::{Value, json};

/// What this session just decided: carried from the work item page to the inbox in a flash
/// (see [`crate::session`]), shown there once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionNotice {
    pub decision: Decision,
    pub run_id: String,
    pub step_id: String,
}

impl DecisionNotice {
    /// The notice as the flash carries it.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "decision": self.decision.as_str(), "run": self.run_id, "step": self.step_id,
        }))
        .expect("a notice serializes")
    }

    /// The notice a flash carried, when it names a decision, a run and a step.
    pub fn from_bytes(bytes: &[u8]) -> Option<DecisionNotice> {
        let value: Value = serde_json::from_slice(bytes).ok()?;
        Some(DecisionNotice {
            decision: Decision::parse(value["decision"].as_str()?)?,
            run_id: value["run"].as_str()?.to_owned(),
            step_id: value["step"].as_str()?.to_owned(),
        })
    }

    /// What the inbox says.
    pub fn text(&self) -> String {
        format!(
            "Done: you {} {} of run {}.",
            self.decision.as_str(),
            self.step_id,
            self.run_id
        )
    }
}
