//! `agentprocess load` run as a real process against `agentprocess serve` run as a real process:
//! runs complete through the full loop of agents and people, with no unexpected error, and the
//! load leaves no open work behind.

use serde_json::Value;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long the server may take to start listening.
const STARTUP_LIMIT: Duration = Duration::from_secs(60);

/// A running `agentprocess serve`, stopped when dropped.
struct Server {
    child: Child,
    address: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nobody listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn serve(data: &Path) -> Server {
    let address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_agentprocess"))
        .args(["serve", "--data"])
        .arg(data)
        .args(["--listen", &address.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start agentprocess serve");
    let mut server = Server { child, address };
    let started = Instant::now();
    // `serve` listens before the gateway writes its dev signing key, which `load` reads: wait
    // for both, the key written whole (one line).
    let key_written =
        || std::fs::read_to_string(data.join("dev-signing-key")).is_ok_and(|key| key.ends_with('\n'));
    while TcpStream::connect(address).is_err() || !key_written() {
        if let Some(status) = server.child.try_wait().unwrap() {
            panic!("agentprocess serve exited with {status} before listening");
        }
        assert!(
            started.elapsed() < STARTUP_LIMIT,
            "agentprocess serve did not listen on {address}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

/// Runs `agentprocess load` against `server`, whose data folder (and dev key) is `data`, with
/// `args` after the server and the folder.
fn load_against(server: &Server, data: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentprocess"))
        .args([
            "load",
            "--server",
            &format!("http://{}", server.address),
            "--data",
        ])
        .arg(data)
        .args(args)
        .output()
        .expect("run agentprocess load")
}

#[test]
fn agents_and_a_person_complete_runs_with_no_unexpected_error() {
    let data = tempfile::tempdir().unwrap();
    let server = serve(data.path());
    let output = load_against(
        &server,
        data.path(),
        &[
            "--agents",
            "4",
            "--people",
            "1",
            "--approvals",
            "50",
            "--warmup",
            "1s",
            "--duration",
            "2s",
            "--json",
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{}\n{stdout}\n{stderr}", output.status);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));

    assert_eq!(report["unexpectedErrors"], 0, "{report:#}");
    assert!(report["runs"].as_u64().unwrap() > 0, "{report:#}");
    for process in ["load-agent-step", "load-approval"] {
        assert!(
            report["runsByProcess"][process].as_u64().unwrap_or(0) > 0,
            "no {process} run completed: {report:#}"
        );
    }
    for tool in ["start_run", "get_work", "claim", "submit", "decide"] {
        let figures = report["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["tool"] == tool)
            .unwrap_or_else(|| panic!("no {tool} calls: {report:#}"));
        assert!(figures["ok"].as_u64().unwrap() > 0, "{figures:#}");
        assert!(figures["p50Ms"].as_f64().unwrap() > 0.0, "{figures:#}");
    }
    assert_eq!(report["settings"]["agents"], 4);
    assert_eq!(report["seconds"], 2.0);

    // The callers finished every run they started: no ready step, claim or person's work item is
    // left for the next load on this store to find before its own runs.
    drop(server);
    let stats = Command::new(env!("CARGO_BIN_EXE_agentprocess"))
        .args(["store", "stats", "--json", "--data"])
        .arg(data.path())
        .output()
        .expect("run agentprocess store stats");
    assert!(
        stats.status.success(),
        "{}",
        String::from_utf8_lossy(&stats.stderr)
    );
    let stats: Value = serde_json::from_slice(&stats.stdout).unwrap();
    let families = stats["families"].as_array().unwrap();
    let keys_of = |family: &str| {
        families
            .iter()
            .find(|row| row["family"] == family)
            .map_or(0, |row| row["keys"].as_u64().unwrap())
    };
    assert!(keys_of("run") > 0, "{stats:#}");
    for open_work in ["ready", "claim", "work"] {
        assert_eq!(
            keys_of(open_work),
            0,
            "{open_work} keys left after the load: {stats:#}"
        );
    }
}

#[test]
fn a_data_folder_without_a_dev_key_is_refused_with_a_clear_message() {
    let data = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_agentprocess"))
        .args(["load", "--server", "http://127.0.0.1:9", "--data"])
        .arg(data.path())
        .args(["--duration", "1s"])
        .output()
        .expect("run agentprocess load");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no dev signing key"), "{stderr}");
}

#[test]
fn a_server_that_does_not_answer_is_refused_before_the_load_starts() {
    let data = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_agentprocess"))
        .args(["load", "--server", &format!("http://127.0.0.1:{}", free_port())])
        .args([
            "--agent-token",
            "a",
            "--person-token",
            "p",
            "--operator-token",
            "o",
            "--data",
        ])
        .arg(data.path())
        .args(["--duration", "1s"])
        .output()
        .expect("run agentprocess load");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("describe at http://127.0.0.1:"), "{stderr}");
}

/// `--rate` paces the agents: over 2 s at 20 runs/s no more than the schedule allows complete
/// (a saturated run of 4 agents completes hundreds), and a rate that is not positive is refused.
/// The pacer never starts a run before its time and starts a late one late rather than dropping
/// it (an open loop), so runs due in the 1 s warmup may complete in the window after a stall of
/// the machine: at most the 4 agents' starts due by the window's end, 4 × (3 s / 200 ms + 1).
#[test]
fn paced_agents_start_no_more_runs_than_the_rate() {
    let data = tempfile::tempdir().unwrap();
    let server = serve(data.path());
    let output = load_against(
        &server,
        data.path(),
        &[
            "--agents",
            "4",
            "--people",
            "0",
            "--rate",
            "20",
            "--warmup",
            "1s",
            "--duration",
            "2s",
            "--json",
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let runs = report["runs"].as_u64().unwrap();
    assert!(
        (1..=64).contains(&runs),
        "{runs} runs in 2 s at 20 runs/s: {report:#}"
    );
    assert_eq!(report["settings"]["rate"], 20.0);

    let refused = load_against(&server, data.path(), &["--rate", "0", "--duration", "1s"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--rate must be a positive number"));
}

/// `--etcd-puts` measures etcd's raw write rate with the roles' own client: against a real etcd
/// it commits one-put transactions and reports their rate and latency; without an etcd that
/// answers it fails with a clear message.
#[test]
fn etcd_puts_measures_a_real_etcd_and_refuses_one_that_is_not_there() {
    let etcd = agentprocess_testkit::EtcdCluster::start(1);
    let output = Command::new(env!("CARGO_BIN_EXE_agentprocess"))
        .args(["load", "--etcd-puts", &etcd.endpoint_list(), "--agents", "4"])
        .args([
            "--warmup",
            "200ms",
            "--duration",
            "1s",
            "--threads",
            "2",
            "--json",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["workers"], 4);
    assert!(report["transactions"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(report["errors"], 0, "{report}");
    assert!(
        report["p99Ms"].as_f64().unwrap() >= report["p50Ms"].as_f64().unwrap(),
        "{report}"
    );

    let port = free_port();
    let output = Command::new(env!("CARGO_BIN_EXE_agentprocess"))
        .args([
            "load",
            "--etcd-puts",
            &format!("http://127.0.0.1:{port}"),
            "--duration",
            "1s",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot reach etcd"), "{stderr}");
}

/// `--idle-agents`: agents with nothing to do, waiting (`x-wait-1`) or polling, and a prober's
/// runs they must hear of. Waiting agents make one call per wait and hear of each run at once;
/// polling agents make one call per poll.
#[test]
fn idle_agents_wait_or_poll_and_hear_of_the_probers_runs() {
    let data = tempfile::tempdir().unwrap();
    let server = serve(data.path());
    let idle = |extra: &[&str]| {
        let mut args = vec![
            "--idle-agents",
            "8",
            "--wake-every",
            "250ms",
            "--warmup",
            "1s",
            "--duration",
            "3s",
            "--json",
        ];
        args.extend_from_slice(extra);
        let output = load_against(&server, data.path(), &args);
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "{}\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_str::<Value>(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    };
    let waiting = idle(&["--wait-seconds", "2"]);
    assert_eq!(waiting["idleAgents"], 8, "{waiting:#}");
    assert_eq!(waiting["failures"], 0, "{waiting:#}");
    let started = waiting["wakesStarted"].as_u64().unwrap();
    assert!(started >= 8, "{waiting:#}");
    // Every run started before the last second was heard of (later ones may fall past the end).
    assert!(
        waiting["wakesHeard"].as_u64().unwrap() + 4 >= started,
        "{waiting:#}"
    );
    assert!(waiting["wakeP50Ms"].as_f64().unwrap() < 1000.0, "{waiting:#}");

    let polling = idle(&["--idle-poll", "500ms", "--no-publish"]);
    assert_eq!(polling["waitSeconds"], Value::Null);
    // 8 agents polling every 500 ms for 3 s: about 48 calls, and a page with nothing at once.
    let calls = polling["getWorkCalls"].as_u64().unwrap();
    assert!((24..=120).contains(&calls), "{polling:#}");
    assert!(polling["getWorkP50Ms"].as_f64().unwrap() < 500.0, "{polling:#}");
}
