//! `describe`: what this server offers. Answered by the gateway itself from configuration.

use crate::tool::names::ToolName;
use serde::Deserialize;
use serde_json::{Value, json};

/// The protocol version this gateway speaks.
pub const PROTOCOL_VERSION: &str = "core-2";

/// What `describe` reports: lease, limits and profiles. The runtime must be configured with the
/// same values; the gateway only reports them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DescribeConfig {
    /// `leaseSeconds`: how long a claim lasts before it must be renewed.
    pub lease_seconds: u64,
    /// `limits.runDataBytes`: the most a run's data may weigh, as JSON.
    pub run_data_bytes: u64,
    /// `maxUploadBytes`: the largest file `upload` takes (decoded).
    pub max_upload_bytes: u64,
    /// Whether the `parallel-1` profile is offered.
    pub parallel: bool,
    /// Whether an evaluator is configured: `check-1` is offered only then (check profile §5).
    pub evaluator_configured: bool,
    /// `limits.checkPass`: the default yes/no pass threshold.
    pub check_pass: f64,
    /// `limits.checkFail`: the default fail threshold; none means below `checkPass` fails.
    pub check_fail: Option<f64>,
    /// `limits.checkConfidence`: the default confidence below which an answer is unsure.
    pub check_confidence: f64,
    /// `limits.checkStateBytes`: how much run data the evaluator is shown.
    pub check_state_bytes: u64,
}

impl Default for DescribeConfig {
    fn default() -> Self {
        DescribeConfig {
            lease_seconds: 600,
            run_data_bytes: 1024 * 1024,
            max_upload_bytes: 10 * 1024 * 1024,
            parallel: true,
            evaluator_configured: false,
            check_pass: 0.9,
            check_fail: None,
            check_confidence: 0.8,
            check_state_bytes: 64 * 1024,
        }
    }
}

impl DescribeConfig {
    /// The `data` of a `describe` result (`describe.result.json`).
    pub fn result(&self) -> Value {
        let mut profiles = Vec::new();
        if self.parallel {
            profiles.push("parallel-1");
        }
        if self.evaluator_configured {
            profiles.push("check-1");
        }
        profiles.push(agentprocess_service::WAIT_PROFILE);
        json!({
            "protocol": "agentprocess",
            "version": PROTOCOL_VERSION,
            "profiles": profiles,
            "leaseSeconds": self.lease_seconds,
            "person": { "format": "email" },
            "tools": ToolName::ALL.map(ToolName::as_str),
            "limits": {
                "runDataBytes": self.run_data_bytes,
                "checkPass": self.check_pass,
                "checkFail": self.check_fail,
                "checkConfidence": self.check_confidence,
                "checkStateBytes": self.check_state_bytes,
            },
            "maxUploadBytes": self.max_upload_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_is_offered_only_with_an_evaluator() {
        let without = DescribeConfig::default().result();
        assert_eq!(without["profiles"], json!(["parallel-1", "x-wait-1"]));
        let with = DescribeConfig {
            evaluator_configured: true,
            check_fail: Some(0.5),
            ..DescribeConfig::default()
        }
        .result();
        assert_eq!(with["profiles"], json!(["parallel-1", "check-1", "x-wait-1"]));
        assert_eq!(with["limits"]["checkFail"], json!(0.5));
        assert_eq!(without["tools"].as_array().unwrap().len(), 14);
    }
}
