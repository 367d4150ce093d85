//! The portable conformance runner: checks any Agent Process server over MCP, each check named
//! by the rule of the protocol it tests.

pub mod checks;
pub mod client;
pub mod processes;
pub mod report;
pub mod walk;

use client::{CallFailure, Client, Revision, Shared};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

/// How one check ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Passed,
    /// The server broke the rule: the call, the answer and the rule.
    Failed(String),
    /// The check could not run against this server, and why.
    NotRun(String),
}

/// One check's result.
#[derive(Debug, Clone)]
pub struct CheckResult {
    pub name: &'static str,
    /// Where the rule is written: `tools.md claim`, `spec §3.5`, `parallel-1`.
    pub rule: &'static str,
    pub outcome: Outcome,
    pub seconds: f64,
}

/// Why a check stopped early.
#[derive(Debug)]
pub enum Stop {
    Failed(String),
    NotRun(String),
}

impl From<CallFailure> for Stop {
    fn from(failure: CallFailure) -> Stop {
        Stop::Failed(format!("no tool result: {failure}"))
    }
}

pub type Checked<T = ()> = Result<T, Stop>;

/// The identities the runner acts as.
#[derive(Debug, Clone)]
pub struct Identities {
    pub agent: String,
    pub second_agent: String,
    /// A person with operator rights (cancel, escalations, the admin API).
    pub operator: String,
    /// A person in every group the runner's processes bind, and the email the server knows them by.
    pub person: String,
    pub person_email: String,
    /// A second person in none of those groups, and their email.
    pub outsider: String,
    pub outsider_email: String,
    /// An agent of another organization, when given.
    pub foreign_agent: Option<String>,
}

/// Moves a server's clock: our server's test clock through its admin API.
#[derive(Debug, Clone)]
pub struct Clock {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Clock {
    pub fn new(server: &str, operator_token: &str) -> Clock {
        Clock {
            http: reqwest::Client::new(),
            url: format!("{}/admin/v1/clock", server.trim_end_matches('/')),
            token: operator_token.to_owned(),
        }
    }

    /// Moves the clock `seconds` forward; an error when the server has no test clock.
    pub async fn advance(&self, seconds: u64) -> Result<String, String> {
        let response = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .json(&json!({ "advanceSeconds": seconds }))
            .send()
            .await
            .map_err(|e| agentprocess_gateway::error_chain(&e))?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        match body["now"].as_str() {
            Some(now) if status.is_success() => Ok(now.to_owned()),
            _ => Err(format!("the server moved no clock (HTTP {status}): {body}")),
        }
    }
}

/// Everything a check acts with.
pub struct Context {
    pub shared: Arc<Shared>,
    pub agent: Client,
    pub second_agent: Client,
    pub operator: Client,
    pub person: Client,
    pub person_email: String,
    pub outsider: Client,
    pub outsider_email: String,
    pub foreign_agent: Option<Client>,
    /// `describe`'s data once read.
    pub describe: Value,
    /// The runner's processes the server lists.
    pub published: BTreeSet<String>,
    pub clock: Option<Clock>,
    /// Tells one runner's runs and request ids from another's.
    pub tag: String,
}

impl Context {
    pub async fn connect(
        endpoint: &str,
        revision: Revision,
        identities: &Identities,
        clock: Option<Clock>,
    ) -> Result<Context, String> {
        let shared = Shared::new(endpoint, revision)?;
        let connect = |who: &'static str, token: &str| {
            let shared = shared.clone();
            let token = token.to_owned();
            async move { Client::connect(&shared, who, &token).await }
        };
        let foreign_agent = match &identities.foreign_agent {
            Some(token) => Some(connect("the agent of another organization", token).await?),
            None => None,
        };
        Ok(Context {
            agent: connect("the first agent", &identities.agent).await?,
            second_agent: connect("the second agent", &identities.second_agent).await?,
            operator: connect("the operator", &identities.operator).await?,
            person: connect("the person", &identities.person).await?,
            person_email: identities.person_email.clone(),
            outsider: connect("the outsider", &identities.outsider).await?,
            outsider_email: identities.outsider_email.clone(),
            foreign_agent,
            shared,
            describe: Value::Null,
            published: BTreeSet::new(),
            clock,
            tag: uuid::Uuid::new_v4().simple().to_string()[..8].to_owned(),
        })
    }

    /// Whether `describe` lists `profile`.
    pub fn offers(&self, profile: &str) -> bool {
        self.describe["profiles"]
            .as_array()
            .is_some_and(|profiles| profiles.iter().any(|p| p == profile))
    }

    /// `NotRun` unless `describe` lists `tool` (one of the optional tools of spec §4.2).
    pub fn needs_tool(&self, tool: &str) -> Checked {
        let listed = self.describe["tools"]
            .as_array()
            .is_some_and(|tools| tools.iter().any(|t| t == tool));
        if listed {
            Ok(())
        } else {
            Err(Stop::NotRun(format!(
                "describe does not list the optional tool {tool}"
            )))
        }
    }

    /// `NotRun` unless `process` is published on the server.
    pub fn needs(&self, process: &str) -> Checked {
        if self.published.contains(process) {
            Ok(())
        } else {
            Err(Stop::NotRun(format!("{process} is not published on the server")))
        }
    }

    /// `NotRun` unless the server's clock can be moved.
    pub fn needs_clock(&self) -> Checked<&Clock> {
        self.clock.as_ref().ok_or_else(|| {
            Stop::NotRun(
                "needs time to pass: the server offers no test clock, and its lease and due times are \
                 longer than the runner waits"
                    .to_owned(),
            )
        })
    }
}

/// A failure of `rule`, with what was seen.
pub fn fail(rule: &str, what: impl std::fmt::Display) -> Stop {
    Stop::Failed(format!("{rule}\n{what}"))
}

/// Calls `tool` and returns its `data`; a failure naming the call and the answer when it was
/// refused.
pub async fn ok(client: &Client, tool: &str, arguments: Value) -> Checked<Value> {
    let answer = client.call(tool, arguments.clone()).await?;
    if answer["ok"] == true {
        Ok(answer["data"].clone())
    } else {
        Err(fail(
            &format!("{tool} must succeed here"),
            format!("call: {} {tool} {arguments}\nanswer: {answer}", client.who),
        ))
    }
}

/// Adds `from`'s members to the object `into`.
pub fn merge(into: &mut Value, from: Value) {
    if let (Some(into), Value::Object(from)) = (into.as_object_mut(), from) {
        into.extend(from);
    }
}

/// A fresh request id.
pub fn request_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Runs `check`, timing it.
pub async fn run_check<F>(name: &'static str, rule: &'static str, check: F) -> CheckResult
where
    F: Future<Output = Checked>,
{
    let started = Instant::now();
    let outcome = match check.await {
        Ok(()) => Outcome::Passed,
        Err(Stop::Failed(why)) => Outcome::Failed(why),
        Err(Stop::NotRun(why)) => Outcome::NotRun(why),
    };
    CheckResult {
        name,
        rule,
        outcome,
        seconds: started.elapsed().as_secs_f64(),
    }
}
