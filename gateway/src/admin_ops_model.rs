//! The request and answer types of the admin API's run operations (`/admin/v1/runs`,
//! `/admin/v1/work`, `/admin/v1/escalations`), shared by their handlers and the operator CLI, so
//! that every field and query parameter is named once.
//!
//! Query strings are built by the `to_query` methods and read back by the `parse` methods: what
//! the CLI sends is what the handlers read.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The path of the runs listing.
pub const RUNS_PATH: &str = "/admin/v1/runs";
/// The path of the ready, unclaimed agent steps.
pub const WORK_PATH: &str = "/admin/v1/work";
/// The path of the open escalations.
pub const ESCALATIONS_PATH: &str = "/admin/v1/escalations";
/// The query parameter prefix of an input filter: `input.amount=48000`.
pub const INPUT_PREFIX: &str = "input.";
/// How many escalations one answer holds without a `limit`.
pub const DEFAULT_ESCALATIONS: usize = 100;
/// The largest `limit` of the escalations.
pub const MAX_ESCALATIONS: usize = 500;

/// The path that cancels `run_id` (percent-encoded as a path segment).
pub fn cancel_path(run_id: &str) -> String {
    format!("{}/cancel", crate::admin_model::run_path(run_id))
}

/// An input filter's value as `list_runs` matches it: text that reads as a JSON number, `true`,
/// `false`, `null` or a quoted string is that value; anything else is the text itself. So
/// `amount=48000` matches the number and `code="007"` the text `007`.
pub fn input_filter_value(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(parsed) if !parsed.is_object() && !parsed.is_array() => parsed,
        _ => Value::String(text.to_owned()),
    }
}

/// `GET /admin/v1/runs`: `list_runs`'s filters and paging, plus filters of the operator's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunsQuery {
    pub process: Option<String>,
    /// `active`, `waiting`, `ended` or `cancelled` (checked by `list_runs`).
    pub state: Option<String>,
    /// `(name, value as typed)`: each becomes an `inputs` field by [`input_filter_value`].
    pub inputs: Vec<(String, String)>,
    /// Only runs with (`true`) or without (`false`) an overdue step.
    pub overdue: Option<bool>,
    /// Only `live` or only `test` runs.
    pub mode: Option<String>,
    /// Only runs with an agent step ready and unclaimed for more than this many seconds.
    pub stuck_seconds: Option<u64>,
    /// Runs per page, 1 to 100 (checked by `list_runs`); default 20.
    pub limit: Option<u64>,
    pub cursor: Option<String>,
}

/// The parameters [`RunsQuery::parse`] reads, for its error message.
const RUNS_PARAMETERS: &str = "process, state, input.NAME, overdue (true or false), mode (live or test), stuck (seconds), limit, cursor";

impl RunsQuery {
    /// The query string, without `?`.
    pub fn to_query(&self) -> String {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        if let Some(process) = &self.process {
            query.append_pair("process", process);
        }
        if let Some(state) = &self.state {
            query.append_pair("state", state);
        }
        for (name, value) in &self.inputs {
            query.append_pair(&format!("{INPUT_PREFIX}{name}"), value);
        }
        if let Some(overdue) = self.overdue {
            query.append_pair("overdue", if overdue { "true" } else { "false" });
        }
        if let Some(mode) = &self.mode {
            query.append_pair("mode", mode);
        }
        if let Some(stuck) = self.stuck_seconds {
            query.append_pair("stuck", &stuck.to_string());
        }
        if let Some(limit) = self.limit {
            query.append_pair("limit", &limit.to_string());
        }
        if let Some(cursor) = &self.cursor {
            query.append_pair("cursor", cursor);
        }
        query.finish()
    }

    /// Reads a query string; `Err` says what is wrong with it. Values `list_runs` judges (state,
    /// limit's range, the cursor) are left to it.
    pub fn parse(query: &str) -> Result<RunsQuery, String> {
        let mut parsed = RunsQuery::default();
        for (key, value) in pairs(query)? {
            if let Some(name) = key.strip_prefix(INPUT_PREFIX) {
                if name.is_empty() {
                    return Err(format!("{key}: name the input after {INPUT_PREFIX}"));
                }
                if parsed.inputs.iter().any(|(seen, _)| seen == name) {
                    return Err(format!("{key}: given twice"));
                }
                parsed.inputs.push((name.to_owned(), value));
                continue;
            }
            let slot_taken = match key.as_str() {
                "process" => parsed.process.replace(value).is_some(),
                "state" => parsed.state.replace(value).is_some(),
                "overdue" => parsed.overdue.replace(boolean(&key, &value)?).is_some(),
                "mode" => {
                    if !matches!(value.as_str(), "live" | "test") {
                        return Err(format!("mode: expected live or test, not {value:?}"));
                    }
                    parsed.mode.replace(value).is_some()
                }
                "stuck" => {
                    let seconds = whole_number(&key, &value)?;
                    if seconds == 0 {
                        return Err("stuck: expected a number of seconds above 0".to_owned());
                    }
                    parsed.stuck_seconds.replace(seconds).is_some()
                }
                "limit" => parsed.limit.replace(whole_number(&key, &value)?).is_some(),
                "cursor" => parsed.cursor.replace(value).is_some(),
                _ => {
                    return Err(format!(
                        "unknown parameter {key:?}; the parameters are {RUNS_PARAMETERS}"
                    ));
                }
            };
            if slot_taken {
                return Err(format!("{key}: given twice"));
            }
        }
        Ok(parsed)
    }

    /// The `inputs` argument of `list_runs`: each filter's value by [`input_filter_value`].
    pub fn inputs_argument(&self) -> Option<Map<String, Value>> {
        if self.inputs.is_empty() {
            return None;
        }
        Some(
            self.inputs
                .iter()
                .map(|(name, value)| (name.clone(), input_filter_value(value)))
                .collect(),
        )
    }
}

/// `GET /admin/v1/work`: ready, unclaimed agent steps of the organization, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkQuery {
    /// Only steps ready for more than this many seconds.
    pub older_than_seconds: Option<u64>,
    /// Only steps whose claims lapsed more than this many times (the page's other steps are
    /// read and left out, so a page may hold fewer than `limit` with more to come).
    pub lease_expired_more_than: Option<u64>,
    /// Steps per page, 1 to 100 (`get_work`'s rule); default 20.
    pub limit: Option<u64>,
    pub cursor: Option<String>,
}

impl WorkQuery {
    pub fn to_query(&self) -> String {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        if let Some(older_than) = self.older_than_seconds {
            query.append_pair("olderThan", &older_than.to_string());
        }
        if let Some(expiries) = self.lease_expired_more_than {
            query.append_pair("leaseExpiredMoreThan", &expiries.to_string());
        }
        if let Some(limit) = self.limit {
            query.append_pair("limit", &limit.to_string());
        }
        if let Some(cursor) = &self.cursor {
            query.append_pair("cursor", cursor);
        }
        query.finish()
    }

    pub fn parse(query: &str) -> Result<WorkQuery, String> {
        let mut parsed = WorkQuery::default();
        for (key, value) in pairs(query)? {
            let slot_taken = match key.as_str() {
                "olderThan" => parsed
                    .older_than_seconds
                    .replace(whole_number(&key, &value)?)
                    .is_some(),
                "leaseExpiredMoreThan" => parsed
                    .lease_expired_more_than
                    .replace(whole_number(&key, &value)?)
                    .is_some(),
                "limit" => parsed.limit.replace(whole_number(&key, &value)?).is_some(),
                "cursor" => parsed.cursor.replace(value).is_some(),
                _ => {
                    return Err(format!(
                        "unknown parameter {key:?}; the parameters are olderThan (seconds), \
                         leaseExpiredMoreThan, limit, cursor"
                    ));
                }
            };
            if slot_taken {
                return Err(format!("{key}: given twice"));
            }
        }
        Ok(parsed)
    }
}

/// `GET /admin/v1/escalations`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EscalationsQuery {
    /// 1 to [`MAX_ESCALATIONS`]; default [`DEFAULT_ESCALATIONS`].
    pub limit: Option<u64>,
}

impl EscalationsQuery {
    pub fn to_query(&self) -> String {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        if let Some(limit) = self.limit {
            query.append_pair("limit", &limit.to_string());
        }
        query.finish()
    }

    pub fn parse(query: &str) -> Result<EscalationsQuery, String> {
        let mut parsed = EscalationsQuery::default();
        for (key, value) in pairs(query)? {
            if key != "limit" {
                return Err(format!("unknown parameter {key:?}; the only parameter is limit"));
            }
            let limit = whole_number(&key, &value)?;
            if !(1..=MAX_ESCALATIONS as u64).contains(&limit) {
                return Err(format!("limit: expected 1 to {MAX_ESCALATIONS}"));
            }
            if parsed.limit.replace(limit).is_some() {
                return Err("limit: given twice".to_owned());
            }
        }
        Ok(parsed)
    }

    /// The limit asked for, or the default.
    pub fn limit(&self) -> usize {
        self.limit
            .and_then(|limit| usize::try_from(limit).ok())
            .unwrap_or(DEFAULT_ESCALATIONS)
    }
}

fn pairs(query: &str) -> Result<Vec<(String, String)>, String> {
    serde_urlencoded::from_str(query).map_err(|e| format!("the query string cannot be read: {e}"))
}

fn whole_number(key: &str, value: &str) -> Result<u64, String> {
    value
        .parse()
        .map_err(|_| format!("{key}: expected a whole number, not {value:?}"))
}

fn boolean(key: &str, value: &str) -> Result<bool, String> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("{key}: expected true or false, not {value:?}")),
    }
}

/// A page of runs: `list_runs` items, in its order; with `stuck`, the stuck steps' runs, the
/// longest waiting first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunsPage {
    pub items: Vec<RunItem>,
    /// Pass as `cursor` (with the same filters) for the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// A `list_runs` item (tools.md `list_runs`), with the stuck step when `stuck` was asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunItem {
    pub id: String,
    pub process: String,
    pub version: u64,
    pub state: String,
    pub outcome: Option<String>,
    pub started_at: String,
    pub updated_at: String,
    pub inputs: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stuck: Option<StuckStep>,
}

/// An agent step of a run that has been ready, unclaimed, for longer than `stuck` asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StuckStep {
    pub step_id: String,
    pub ready_since: String,
    pub age_seconds: u64,
}

/// `POST /admin/v1/runs/{runId}/cancel`'s body. `reason` is passed to `cancel` as given, so a
/// missing one is refused by the protocol's own rule; without `requestId` the server makes one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CancelRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// The part of a run view (the cancel answer) a client reads; the answer holds the whole view.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RunViewHeader {
    pub run: RunHeader,
}

/// A run view's `run`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunHeader {
    pub id: String,
    pub process: String,
    pub version: u64,
    pub state: String,
    pub ended: Option<RunEnded>,
}

/// A run view's `run.ended`: who ended it, when, and the note (a cancel's reason).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RunEnded {
    pub by: String,
    pub at: String,
    pub note: Option<String>,
}

/// A page of ready, unclaimed agent steps, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkPage {
    pub items: Vec<ReadyStep>,
    pub next_cursor: Option<String>,
}

/// One ready agent step no agent has claimed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadyStep {
    pub run_id: String,
    pub process: String,
    pub version: u64,
    pub step_id: String,
    /// `live` or `test`.
    pub mode: String,
    pub ready_since: String,
    /// Seconds from `readySince` to the server's now.
    pub age_seconds: u64,
    /// How many times a claim of the step lapsed before it was ready again.
    pub lease_expiries: u32,
}

/// The open escalations, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EscalationsPage {
    pub items: Vec<OpenEscalation>,
    /// More open escalations exist than `limit` let through, or than the server reads at once.
    pub truncated: bool,
}

/// An escalated step waiting on the operators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenEscalation {
    pub run_id: String,
    pub process: String,
    pub version: u64,
    pub step_id: String,
    pub work_item_id: String,
    /// Who escalated: an agent id, or `check` when a check was unsure.
    pub escalated_by: String,
    pub note: String,
    pub opened_at: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_runs_query_reads_back_what_it_writes() {
        let query = RunsQuery {
            process: Some("purchase-request".into()),
            state: Some("active".into()),
            inputs: vec![
                ("requestId".into(), "PR 1&2".into()),
                ("amount".into(), "48000".into()),
            ],
            overdue: Some(false),
            mode: Some("test".into()),
            stuck_seconds: Some(600),
            limit: Some(5),
            cursor: Some("00ff".into()),
        };
        assert_eq!(RunsQuery::parse(&query.to_query()), Ok(query));
        assert_eq!(RunsQuery::parse(""), Ok(RunsQuery::default()));
    }

    #[test]
    fn a_runs_query_refuses_what_it_cannot_read() {
        for (query, says) in [
            ("colour=red", "unknown parameter"),
            ("process=a&process=b", "given twice"),
            ("input.a=1&input.a=2", "given twice"),
            ("input.=1", "name the input"),
            ("overdue=yes", "true or false"),
            ("mode=prod", "live or test"),
            ("stuck=0", "above 0"),
            ("stuck=10m", "whole number"),
            ("limit=ten", "whole number"),
        ] {
            let error = RunsQuery::parse(query).unwrap_err();
            assert!(error.contains(says), "{query}: {error}");
        }
    }

    #[test]
    fn input_values_read_as_json_scalars_or_else_as_text() {
        let query = RunsQuery::parse("input.amount=48000&input.code=%22007%22&input.name=Acme&input.ok=true")
            .unwrap();
        assert_eq!(
            Value::Object(query.inputs_argument().unwrap()),
            json!({ "amount": 48000, "code": "007", "name": "Acme", "ok": true })
        );
        assert_eq!(input_filter_value("[1]"), json!("[1]"));
    }

    #[test]
    fn work_and_escalation_queries_read_back_and_refuse() {
        let work = WorkQuery {
            older_than_seconds: Some(600),
            lease_expired_more_than: Some(2),
            limit: Some(3),
            cursor: Some("ab".into()),
        };
        assert_eq!(WorkQuery::parse(&work.to_query()), Ok(work));
        assert!(WorkQuery::parse("older=1").is_err());
        let escalations = EscalationsQuery { limit: Some(7) };
        assert_eq!(EscalationsQuery::parse(&escalations.to_query()), Ok(escalations));
        assert_eq!(EscalationsQuery::default().limit(), DEFAULT_ESCALATIONS);
        assert!(EscalationsQuery::parse("limit=0").is_err());
        assert!(EscalationsQuery::parse("limit=501").is_err());
    }

    #[test]
    fn a_cancel_path_encodes_the_run_id_as_one_segment() {
        assert_eq!(cancel_path("r_8f2"), "/admin/v1/runs/r_8f2/cancel");
        assert_eq!(cancel_path("a/b c"), "/admin/v1/runs/a%2Fb%20c/cancel");
    }
}
