//! The README's first run, followed literally against the built `agentprocess serve`: the server
//! started as it says (in a folder, without `--data`), only on a free port instead of 8080; its
//! shell blocks run by `sh` with nothing changed but that URL and the process folder; the tokens
//! those blocks mint; its Python script and configuration file as written; and the tool calls of
//! its walk, escalation included, with its arguments. The MCP Inspector commands need Node and
//! the npm registry, so their test runs only when asked for (`cargo test -- --ignored`).

mod common;

use common::{Mcp, Server, request_id};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The port the README's URLs name, which the test server must not use.
const README_URL: &str = "http://127.0.0.1:8080";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).expect("README.md")
}

/// The first code block fenced as `lang` after the first `anchor` in the README.
fn block_after(anchor: &str, lang: &str) -> String {
    let readme = readme();
    let from = readme
        .find(anchor)
        .unwrap_or_else(|| panic!("the README has no {anchor:?}"));
    let fence = format!("```{lang}\n");
    let start = readme[from..]
        .find(&fence)
        .map(|at| from + at + fence.len())
        .unwrap_or_else(|| panic!("no {lang} block after {anchor:?}"));
    let end = start + readme[start..].find("```\n").expect("a closing fence");
    readme[start..end].to_owned()
}

/// The Python of the test venv (`scripts/install-deps.sh`), which has the MCP SDK.
fn venv_python() -> PathBuf {
    let python = root().join("target/py-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/install-deps.sh to create the Python venv with the MCP SDK",
        python.display()
    );
    python
}

/// The tokens step 2 mints.
struct Tokens {
    ops: String,
    agent: String,
    mira: String,
}

/// A server started as step 1 says, with steps 2 and 3 done in its folder.
struct FirstRun {
    folder: tempfile::TempDir,
    server: Server,
    tokens: Tokens,
}

impl FirstRun {
    /// Step 1, then the shell blocks of steps 2 and 3 in one `sh`, as one terminal session.
    fn start() -> FirstRun {
        let folder = tempfile::tempdir().unwrap();
        let server = Server::start_in_folder(folder.path(), &[]);
        assert_ne!(
            server.url, README_URL,
            "the test runs on another port than the README's"
        );
        let mut run = FirstRun {
            folder,
            server,
            tokens: Tokens {
                ops: String::new(),
                agent: String::new(),
                mira: String::new(),
            },
        };
        let script = format!(
            "{}\n{}\nprintf '%s\\n' \"$OPS\" \"$AGENT\" \"$MIRA\"\n",
            block_after("**2. Mint tokens**", "sh"),
            block_after("**3. Import and publish a process.**", "sh"),
        );
        let output = run.sh(&script);
        let text = String::from_utf8(output.stdout).unwrap();
        assert!(text.contains("purchase-request: published version 1"), "{text}");
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines
                .iter()
                .any(|line| line.split_whitespace().collect::<Vec<_>>()
                    == ["purchase-request", "1", "1", "no"]),
            "process list: {text}"
        );
        let [ops, agent, mira] = lines[lines.len() - 3..] else {
            panic!("no tokens in {text}")
        };
        run.tokens = Tokens {
            ops: ops.to_owned(),
            agent: agent.to_owned(),
            mira: mira.to_owned(),
        };
        run
    }

    /// A README shell block as typed for this server: its URL in place of the README's, and
    /// the checkout's `examples/purchase-request` by its full path, since the block runs in the
    /// server's folder rather than in the checkout.
    fn for_this_server(&self, block: &str) -> String {
        let example = agentprocess_testkit::example("purchase-request");
        let folder = example.parent().unwrap();
        block
            .replace(README_URL, &self.server.url)
            .replace("examples/purchase-request", &folder.display().to_string())
    }

    /// Runs a README shell block with `sh -e` in the server's folder, the built binary and the
    /// test venv's `python3` first on `PATH` and the tokens minted so far in `OPS`, `AGENT`,
    /// `MIRA`. Panics with its output when it fails.
    fn sh(&self, block: &str) -> Output {
        let binary = PathBuf::from(env!("CARGO_BIN_EXE_agentprocess"));
        let python = venv_python();
        let path = std::env::join_paths(
            [binary.parent().unwrap(), python.parent().unwrap()]
                .into_iter()
                .map(Path::to_path_buf)
                .chain(std::env::split_paths(
                    &std::env::var_os("PATH").unwrap_or_default(),
                )),
        )
        .unwrap();
        let output = Command::new("sh")
            .arg("-ec")
            .arg(self.for_this_server(block))
            .current_dir(self.folder.path())
            .env("PATH", path)
            .env_remove("AGENTPROCESS_URL")
            .env_remove("AGENTPROCESS_TOKEN")
            .env("OPS", &self.tokens.ops)
            .env("AGENT", &self.tokens.agent)
            .env("MIRA", &self.tokens.mira)
            .output()
            .expect("sh runs");
        assert!(
            output.status.success(),
            "{block}\nfailed ({}):\n{}\n{}\nserver:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            self.server.stderr()
        );
        output
    }

    /// Step 4's Python script, saved as `first_run.py` in the folder and run as the README runs it.
    fn python_script(&self) -> String {
        std::fs::write(
            self.folder.path().join("first_run.py"),
            block_after("*The MCP Python SDK*", "python"),
        )
        .unwrap();
        let run_line = block_after("*The MCP Python SDK*", "sh");
        String::from_utf8(self.sh(&run_line).stdout).unwrap()
    }

    async fn client(&self, token: &str) -> Mcp {
        Mcp::connect(&self.server.mcp_url(), token).await
    }
}

/// Step 5.2's `start_run`, for purchase request `id`.
async fn start_purchase_request(agent: &Mcp, id: &str) -> String {
    let started = agent
        .ok(
            "start_run",
            json!({ "process": "purchase-request",
                    "inputs": { "requestId": id,
                                "quoteDocument": format!("https://docs.example/{}", id.to_lowercase()),
                                "approver": "mira@example.com" },
                    "requestId": request_id() }),
        )
        .await;
    started["run"]["id"].as_str().unwrap().to_owned()
}

/// Step 5.4's `claim` of `step`; returns the token.
async fn claim(agent: &Mcp, run_id: &str, step: &str) -> String {
    let claimed = agent
        .ok(
            "claim",
            json!({ "runId": run_id, "stepId": step, "requestId": request_id() }),
        )
        .await;
    claimed["token"].as_str().unwrap().to_owned()
}

/// Step 5.5's `submit` of `assess`.
async fn submit_assess(agent: &Mcp, token: &str) -> Value {
    agent
        .ok(
            "submit",
            json!({ "token": token,
                    "output": { "amountUsd": 4200.5, "vendor": "Acme", "justification": "Two monitors for the new hires" },
                    "evidence": [{ "kind": "link", "ref": "https://erp.example/q/1" }],
                    "summary": "Assessed", "next": "team_lead_approval", "reason": "under 5000",
                    "requestId": request_id() }),
        )
        .await
}

/// A person's `get_work` item of `run_id`, if any.
async fn person_item(person: &Mcp, run_id: &str) -> Option<Value> {
    let work = person.ok("get_work", json!({})).await;
    work["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["runId"] == run_id)
        .map(|item| item["workItem"].clone())
}

/// An agent's `get_work` item of `run_id`, if any.
async fn agent_item(agent: &Mcp, run_id: &str) -> Option<Value> {
    let work = agent.ok("get_work", json!({})).await;
    work["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["runId"] == run_id)
        .cloned()
}

/// `decide` with the item's exact `decide.arguments`, a fresh `requestId` and `fields` added.
async fn decide(person: &Mcp, item: &Value, fields: Value) -> Value {
    let mut arguments = item["decide"]["arguments"].clone();
    arguments["requestId"] = json!(request_id());
    for (key, value) in fields.as_object().unwrap() {
        arguments[key] = value.clone();
    }
    person.ok("decide", arguments).await
}

fn step_state(view: &Value, step: &str) -> Value {
    view["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == step)
        .map(|s| s["state"].clone())
        .unwrap_or_else(|| panic!("no step {step} in {view}"))
}

/// Steps 1 to 5: tokens minted without `--url` for a server on another port, the process
/// imported and published by the CLI, the configuration file and the Python script as written,
/// and the walk to an ended run.
#[tokio::test(flavor = "multi_thread")]
async fn the_readme_first_run_works_as_written() {
    let first_run = FirstRun::start();

    // Step 4: the configuration file names this server and the agent's token; a client using
    // exactly its URL and header is served.
    first_run.sh(&block_after("*A configuration file*", "sh"));
    let file: Value =
        serde_json::from_slice(&std::fs::read(first_run.folder.path().join("mcp.json")).unwrap()).unwrap();
    let entry = &file["mcpServers"]["agentprocess"];
    assert_eq!(entry["type"], "http");
    assert_eq!(entry["url"], first_run.server.mcp_url());
    let header = entry["headers"]["Authorization"].as_str().unwrap();
    let from_file = Mcp::connect(
        entry["url"].as_str().unwrap(),
        header.strip_prefix("Bearer ").expect("a bearer header"),
    )
    .await;
    let described = from_file.ok("describe", json!({})).await;
    assert_eq!(described["version"], "core-2");
    from_file.close().await;

    // Step 4: the Python script, before any run.
    assert_eq!(first_run.python_script(), "agentprocess core-2\n");

    // Step 5.
    let agent = first_run.client(&first_run.tokens.agent).await;
    let described = agent.ok("describe", json!({})).await;
    assert_eq!(described["protocol"], "agentprocess");
    let run_id = start_purchase_request(&agent, "PR-1").await;
    let ready = agent_item(&agent, &run_id).await.expect("assess is ready");
    assert_eq!(ready["stepId"], "assess");
    assert_eq!(ready["claim"]["arguments"]["stepId"], "assess");
    assert_eq!(
        first_run.python_script(),
        format!("agentprocess core-2\n{run_id} assess\n")
    );
    let token = claim(&agent, &run_id, "assess").await;
    let submitted = submit_assess(&agent, &token).await;
    assert_eq!(step_state(&submitted, "team_lead_approval"), "waiting");

    let mira = first_run.client(&first_run.tokens.mira).await;
    let approval = person_item(&mira, &run_id).await.expect("Mira's approval");
    assert!(
        approval["decide"]["decisions"]
            .as_array()
            .unwrap()
            .contains(&json!("approved"))
    );
    decide(&mira, &approval, json!({ "decision": "approved" })).await;

    let token = claim(&agent, &run_id, "place_order").await;
    agent
        .ok(
            "submit",
            json!({ "token": token, "output": { "orderNumber": "PO-1" },
                    "evidence": [{ "kind": "link", "ref": "https://erp.example/orders/PO-1" }],
                    "summary": "Placed the order", "requestId": request_id() }),
        )
        .await;
    let run = agent.ok("get_run", json!({ "runId": run_id })).await;
    assert_eq!(run["run"]["state"], "ended", "{run}");
    assert_eq!(run["data"]["steps"]["assess"]["by"], "ap-bot");
    assert_eq!(run["data"]["steps"]["team_lead_approval"]["decision"], "approved");
    assert_eq!(
        run["data"]["steps"]["team_lead_approval"]["by"],
        "mira@example.com"
    );
    assert_eq!(
        run["data"]["steps"]["place_order"]["output"]["orderNumber"],
        "PO-1"
    );
    agent.close().await;
    mira.close().await;
}

/// Step 6: the agent escalates; the operator minted in step 2 sees the escalation in `get_work`
/// and returns it to the agent, who finishes the step; in a third run the operator completes
/// the step in the agent's place.
#[tokio::test(flavor = "multi_thread")]
async fn the_readme_escalation_path_works_as_written() {
    let first_run = FirstRun::start();
    let agent = first_run.client(&first_run.tokens.agent).await;
    let ops = first_run.client(&first_run.tokens.ops).await;
    let note = "The quote is an unreadable scan; need its amount and vendor.";

    let returned_run = start_purchase_request(&agent, "PR-2").await;
    let token = claim(&agent, &returned_run, "assess").await;
    let escalated = agent
        .ok(
            "escalate",
            json!({ "token": token, "note": note, "requestId": request_id() }),
        )
        .await;
    assert_eq!(step_state(&escalated, "assess"), "waiting");
    assert_eq!(escalated["workItems"][0]["escalation"]["note"], note);
    agent
        .refused(
            "renew",
            json!({ "token": token, "requestId": request_id() }),
            "stale",
        )
        .await;

    let escalation = person_item(&ops, &returned_run)
        .await
        .expect("the operator sees the escalation in get_work");
    assert_eq!(escalation["escalation"]["note"], note);
    assert_eq!(
        escalation["decide"]["decisions"],
        json!(["returned", "completed", "failed"])
    );
    let reading = "The quote is for 4350 USD from Acme; use that.";
    decide(
        &ops,
        &escalation,
        json!({ "decision": "returned", "note": reading }),
    )
    .await;
    let again = agent_item(&agent, &returned_run)
        .await
        .expect("assess is ready again");
    assert_eq!(again["stepId"], "assess");
    assert_eq!(again["handoff"]["returned"]["note"], reading);
    assert_eq!(again["handoff"]["returned"]["by"], "ops@example.com");
    let token = claim(&agent, &returned_run, "assess").await;
    let submitted = submit_assess(&agent, &token).await;
    assert_eq!(step_state(&submitted, "team_lead_approval"), "waiting");

    let completed_run = start_purchase_request(&agent, "PR-3").await;
    let token = claim(&agent, &completed_run, "assess").await;
    agent
        .ok(
            "escalate",
            json!({ "token": token, "note": note, "requestId": request_id() }),
        )
        .await;
    let escalation = person_item(&ops, &completed_run)
        .await
        .expect("the operator sees the escalation in get_work");
    let completed = decide(
        &ops,
        &escalation,
        json!({ "decision": "completed",
                "output": { "amountUsd": 4350, "vendor": "Acme",
                            "justification": "Two monitors; quote read by operations" },
                "evidence": [{ "kind": "link", "ref": "https://erp.example/q/2" }],
                "summary": "Read the quote", "next": "team_lead_approval", "reason": "under 5000" }),
    )
    .await;
    assert_eq!(completed["data"]["steps"]["assess"]["by"], "ops@example.com");
    assert_eq!(step_state(&completed, "team_lead_approval"), "waiting");
    let mira = first_run.client(&first_run.tokens.mira).await;
    assert!(person_item(&mira, &completed_run).await.is_some());
    for client in [agent, ops, mira] {
        client.close().await;
    }
}

/// Step 4's MCP Inspector commands as written (with the header, and with the configuration
/// file), through `npx` as the README runs them (`scripts/install-deps.sh` installs Node when
/// missing and fetches the pinned Inspector).
#[tokio::test(flavor = "multi_thread")]
async fn the_readme_inspector_commands_work_as_written() {
    let first_run = FirstRun::start();
    first_run.sh(&block_after("*A configuration file*", "sh"));
    let output = first_run.sh(&block_after("*The MCP Inspector CLI*", "sh"));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("\"protocol\": \"agentprocess\""), "{text}");
    assert!(text.contains("\"items\": []"), "{text}");
    assert_eq!(text.matches("\"ok\": true").count(), 2, "{text}");
}
