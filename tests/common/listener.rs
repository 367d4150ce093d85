//! `tests/python/listen.py` (the MCP Python SDK on a `subscriptions/listen` stream) in a child
//! process, whose lines the Rust test reads as they come.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::sync::mpsc;

/// One running `listen.py`: an agent's stream of its work of one process.
pub struct Listener {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
}

impl Listener {
    /// Starts `listen.py` against `mcp_url` with `token`, subscribed to the work of `process`;
    /// returns once it says it is listening (panics with its errors when it does not).
    pub async fn start(mcp_url: &str, token: &str, process: &str) -> Listener {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let python = root.join("target/py-venv/bin/python");
        assert!(
            python.exists(),
            "{} is missing: run scripts/install-deps.sh",
            python.display()
        );
        let mut child = Command::new(&python)
            .arg(root.join("tests/python/listen.py"))
            .args([mcp_url, token, process])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (said, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if said.send(line).is_err() {
                    return;
                }
            }
        });
        let mut listener = Listener { child, lines };
        listener.expect("listening", Duration::from_secs(60)).await;
        listener
    }

    /// Waits up to `patience` for the next line, which must be `expected`; panics with the
    /// script's errors otherwise.
    async fn expect(&mut self, expected: &str, patience: Duration) {
        let line = tokio::time::timeout(patience, self.lines.recv()).await;
        if line.as_ref().ok().and_then(Option::as_deref) != Some(expected) {
            let _ = self.child.kill();
            let mut stderr = String::new();
            self.child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut stderr)
                .unwrap();
            panic!("listen.py said {line:?}, not {expected:?}:\n{stderr}");
        }
    }

    /// Waits for the script to say it heard of `run` (its notification, then its read of the
    /// resource), then for it to end well; panics otherwise.
    pub async fn hears(mut self, run: &str) {
        self.expect(&format!("heard {run}"), Duration::from_secs(30))
            .await;
        self.finished();
    }

    /// Waits for the script to end; panics unless it ended well.
    fn finished(mut self) {
        let status = self.child.wait().unwrap();
        assert!(status.success(), "listen.py: {status}");
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
