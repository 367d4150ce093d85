//! `agentprocess process import|list` run as real processes against an admin API served over
//! loopback HTTP in this test (admin routes behind the bearer layer, a runtime on an in-memory
//! store), with tokens minted by `agentprocess token`: output, exit codes, and every way a call
//! can fail.

use agentprocess_gateway::auth::require_bearer;
use agentprocess_gateway::{AdminParts, AuthConfig, Authenticator, admin_routes};
use agentprocess_process::Offer;
use agentprocess_run_actor::runtime::{Clock, LocalBlobs, Runtime, RuntimeConfig};
use agentprocess_store::{EmbeddedOptions, EmbeddedStore};
use agentprocess_testkit::example;
use axum::middleware::from_fn_with_state;
use serde_json::Value;
use std::process::{Command, Output};
use std::sync::Arc;

/// A server on a free loopback port; its dev key lives in `data`.
struct Server {
    url: String,
    data: tempfile::TempDir,
    _blobs: tempfile::TempDir,
}

async fn start() -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let data = tempfile::tempdir().unwrap();
    let blobs = tempfile::tempdir().unwrap();
    let authenticator = Arc::new(
        Authenticator::new(
            &AuthConfig::default(),
            &url,
            &agentprocess_gateway::auth::DevKeyLocation::DataDir(data.path().to_owned()),
        )
        .unwrap(),
    );
    let runtime = Runtime::new(
        Arc::new(EmbeddedStore::in_memory(EmbeddedOptions::default())),
        Arc::new(LocalBlobs::new(blobs.path())),
        RuntimeConfig::default(),
        Clock::system(),
    );
    let offer = Offer {
        check: false,
        ..Offer::EVERYTHING
    };
    let parts = AdminParts {
        catalog: runtime.catalog().clone(),
        store: runtime.store().clone(),
        keys: runtime.keys().clone(),
        hints: runtime.hints().clone(),
    };
    let app = admin_routes(parts, offer).route_layer(from_fn_with_state(authenticator, require_bearer));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Server {
        url,
        data,
        _blobs: blobs,
    }
}

/// Runs `agentprocess` without the caller's AGENTPROCESS_* environment, off the async workers.
async fn agentprocess(args: &[&str], env: &[(&str, &str)]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_agentprocess"))
            .args(&args)
            .env_remove("AGENTPROCESS_URL")
            .env_remove("AGENTPROCESS_TOKEN")
            .envs(env)
            .output()
            .expect("run agentprocess")
    })
    .await
    .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// The folder of our example process `name` (`examples/NAME`).
fn example_folder(name: &str) -> String {
    example(name).parent().unwrap().display().to_string()
}

impl Server {
    /// A dev token minted by `agentprocess token` for this server.
    async fn token(&self, operator: bool) -> String {
        let data = self.data.path().display().to_string();
        let mut args = vec![
            "token",
            "--data",
            &data,
            "--url",
            &self.url,
            "--org",
            "acme",
            "--person",
            "ops@acme.test",
        ];
        if operator {
            args.push("--operator");
        }
        let output = agentprocess(&args, &[]).await;
        assert!(output.status.success(), "{}", stderr(&output));
        stdout(&output).trim().to_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_bind_publish_then_list() {
    let server = start().await;
    let token = server.token(true).await;
    let hash = agentprocess(&["process", "hash", &example_folder("purchase-request")], &[]).await;
    let hash = stdout(&hash).trim().to_owned();

    let output = agentprocess(
        &[
            "process",
            "import",
            &example_folder("purchase-request"),
            "--bind",
            "executive=g_executive",
            "--bind",
            "budget-owner=g_budget_owners",
            "--publish",
            "--server",
            &server.url,
            "--token",
            &token,
        ],
        &[],
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.contains(&format!("purchase-request: draft imported, content hash {hash}")),
        "{text}"
    );
    assert!(text.contains("role executive -> group g_executive"), "{text}");
    assert!(
        text.contains("role budget-owner -> group g_budget_owners"),
        "{text}"
    );
    assert!(text.contains("purchase-request: published version 1"), "{text}");

    // The server and token from the environment; a file path rather than a folder; no binding.
    let notes = example("release-notes").display().to_string();
    let env = [
        ("AGENTPROCESS_URL", server.url.as_str()),
        ("AGENTPROCESS_TOKEN", token.as_str()),
    ];
    let output = agentprocess(&["process", "import", &notes], &env).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("role product-manager: unbound"), "{text}");
    assert!(
        text.contains(
            "release-notes: imported as a draft, not published; to publish it, run again with \
             --bind product-manager=GROUP --publish"
        ),
        "{text}"
    );

    let output = agentprocess(&["process", "list"], &env).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let lines: Vec<String> = stdout(&output)
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        lines,
        [
            "NAME LATEST VERSIONS DRAFT",
            // The draft stays after publication; it is what version 1 is.
            "purchase-request 1 1 no",
            "release-notes - 0 yes"
        ]
    );

    let output = agentprocess(&["process", "list", "--json"], &env).await;
    assert_eq!(output.status.code(), Some(0));
    let listed: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(listed["processes"][0]["versions"][0]["contentHash"], hash);
    assert_eq!(
        listed["processes"][0]["versions"][0]["roles"]["executive"],
        "g_executive"
    );

    // --json: the server's answers, one object; bind and publish a second version.
    let output = agentprocess(
        &[
            "process",
            "import",
            &example_folder("purchase-request"),
            "--bind",
            "executive=g_executive_eu",
            "--publish",
            "--json",
        ],
        &env,
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let answers: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(answers["import"]["draft"]["contentHash"], hash);
    assert_eq!(
        answers["import"]["draft"]["bindings"]["budget-owner"],
        "g_budget_owners"
    );
    assert_eq!(
        answers["bindings"]["draft"]["bindings"]["executive"],
        "g_executive_eu"
    );
    assert_eq!(answers["publish"]["version"], 2);

    // A binding changed and not published: the draft differs from version 2 now.
    let output = agentprocess(
        &[
            "process",
            "import",
            &example_folder("purchase-request"),
            "--bind",
            "executive=g_executive_us",
        ],
        &env,
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).contains(
            "purchase-request: imported as a draft, not published; to publish it, run again with --publish"
        ),
        "{}",
        stdout(&output)
    );
    let output = agentprocess(&["process", "list"], &env).await;
    let text = stdout(&output);
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["purchase-request", "2", "2", "yes"]),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_print_every_issue_and_exit_1() {
    let server = start().await;
    let token = server.token(true).await;
    let env = [
        ("AGENTPROCESS_URL", server.url.as_str()),
        ("AGENTPROCESS_TOKEN", token.as_str()),
    ];

    // An invalid process: every issue on its own line of stderr.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.md");
    std::fs::write(
        &bad,
        "---\nname: Bad_Name\ndescription: x\ncolour: blue\nsteps:\n  - id: a\n    agent: Do it.\n    next: nowhere\n---\n",
    )
    .unwrap();
    let output = agentprocess(&["process", "import", &bad.display().to_string()], &env).await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let errors = stderr(&output);
    assert!(errors.lines().any(|l| l.starts_with("name")), "{errors}");
    assert!(errors.lines().any(|l| l.contains("colour")), "{errors}");
    assert!(errors.lines().any(|l| l.contains("nowhere")), "{errors}");
    assert_eq!(stdout(&output), "");

    // Publishing with roles unbound: one line per role.
    let output = agentprocess(
        &["process", "import", &example_folder("policy-update"), "--publish"],
        &env,
    )
    .await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let errors = stderr(&output);
    for role in ["compliance-reviewer", "policy-owner", "security-reviewer"] {
        assert!(
            errors
                .lines()
                .any(|l| l.starts_with(&format!("bindings.{role}:"))),
            "{errors}"
        );
    }
    assert!(
        errors.contains("policy-update is imported as a draft, not published; bind every role first:"),
        "{errors}"
    );
    for role in ["compliance-reviewer", "policy-owner", "security-reviewer"] {
        assert!(errors.contains(&format!("--bind {role}=GROUP")), "{errors}");
    }

    // A role the process does not have.
    let output = agentprocess(
        &[
            "process",
            "import",
            &example_folder("release-notes"),
            "--bind",
            "janitor=g_x",
        ],
        &env,
    )
    .await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output)
            .lines()
            .any(|l| l.starts_with("bindings.janitor:"))
    );

    // A profile the server does not offer.
    let output = agentprocess(&["process", "import", &example_folder("partner-screening")], &env).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("check"), "{}", stderr(&output));

    // A folder named other than its process, refused before any request.
    let folder = dir.path().join("not-release-notes");
    std::fs::create_dir(&folder).unwrap();
    std::fs::copy(example("release-notes"), folder.join("PROCESS.md")).unwrap();
    let output = agentprocess(&["process", "import", &folder.display().to_string()], &env).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("does not equal the folder name"),
        "{}",
        stderr(&output)
    );

    // Nothing of these was published.
    let output = agentprocess(&["process", "list", "--json"], &env).await;
    let listed: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let processes = listed["processes"].as_array().unwrap();
    assert!(processes.iter().all(|p| p["latestVersion"].is_null()), "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_without_operator_rights_is_told_what_it_needs() {
    let server = start().await;
    let token = server.token(false).await;
    for args in [
        vec!["process", "import", &example_folder("release-notes")],
        vec!["process", "list"],
    ] {
        let mut args = args.clone();
        args.extend(["--server", &server.url, "--token", &token]);
        let output = agentprocess(&args, &[]).await;
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        let errors = stderr(&output);
        assert!(errors.contains("an operator token is needed"), "{errors}");
        assert!(errors.contains("agentprocess token"), "{errors}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_and_connection_errors_exit_2() {
    let server = start().await;

    // No token at all.
    for args in [
        vec!["process", "list", "--server", &server.url],
        vec![
            "process",
            "import",
            &example_folder("release-notes"),
            "--server",
            &server.url,
        ],
    ] {
        let output = agentprocess(&args, &[]).await;
        assert_eq!(output.status.code(), Some(2));
        assert!(stderr(&output).contains("no token"), "{}", stderr(&output));
        assert!(stderr(&output).contains("AGENTPROCESS_TOKEN"));
    }

    // A token the server does not accept.
    let output = agentprocess(
        &["process", "list", "--server", &server.url, "--token", "not-a-jwt"],
        &[],
    )
    .await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("did not accept the token"),
        "{}",
        stderr(&output)
    );

    // Nobody listening on the port.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let unreachable = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let output = agentprocess(
        &["process", "list", "--server", &unreachable, "--token", "t"],
        &[],
    )
    .await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains(&format!("cannot reach the server at {unreachable}")),
        "{}",
        stderr(&output)
    );

    // Bad arguments.
    let output = agentprocess(
        &[
            "process",
            "import",
            &example_folder("release-notes"),
            "--bind",
            "product-manager",
        ],
        &[],
    )
    .await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("is not ROLE=GROUP"),
        "{}",
        stderr(&output)
    );
    let output = agentprocess(&["process", "list", "--server", "ftp://x", "--token", "t"], &[]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("is not an http(s) URL"));
    let output = agentprocess(
        &[
            "process",
            "import",
            "/no/such/PROCESS.md",
            "--server",
            &server.url,
            "--token",
            "t",
        ],
        &[],
    )
    .await;
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("cannot read"), "{}", stderr(&output));
}
