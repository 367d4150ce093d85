//! The browser tests' driver: the prerequisites `scripts/install-deps.sh` installs, and a
//! Playwright script run against a server, whose summary the Rust test reads.

use super::Server;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

/// What the browser tests need from `scripts/install-deps.sh`: the venv's Python with
/// Playwright and the MCP SDK, axe-core, Debian's chromium.
pub fn browser_prerequisites() -> (PathBuf, PathBuf) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("target/py-venv/bin/python");
    let axe = root.join("target/ui-test-deps/node_modules/axe-core/axe.min.js");
    let chromium = PathBuf::from("/usr/bin/chromium");
    for (path, what) in [
        (&python, "the Python venv"),
        (&axe, "axe-core"),
        (&chromium, "Debian's chromium"),
    ] {
        assert!(
            path.exists(),
            "{} ({what}) is missing: run scripts/install-deps.sh",
            path.display()
        );
    }
    let playwright = Command::new(&python)
        .args(["-c", "import playwright.async_api, mcp.client.auth"])
        .output()
        .unwrap();
    assert!(
        playwright.status.success(),
        "Playwright or the MCP SDK is not in target/py-venv: run scripts/install-deps.sh\n{}",
        String::from_utf8_lossy(&playwright.stderr)
    );
    (python, axe)
}

/// Runs `tests/python/SCRIPT BEFORE... URL SCREENSHOTS AXE AFTER...` against `server`, with
/// screenshots in `target/ui-screenshots/<script's name>/`; returns the summary it prints last,
/// after checking that every page it names in `pages` has its screenshot.
pub async fn drive_browser_script(server: &Server, script: &str, before: &[&str], after: &[&str]) -> Value {
    let (python, axe) = browser_prerequisites();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let stem = script.trim_end_matches(".py");
    let screenshots = root.join("target/ui-screenshots").join(stem);
    let mut command = Command::new(&python);
    command
        .arg(root.join("tests/python").join(script))
        .args(before)
        .arg(&server.url)
        .arg(&screenshots)
        .arg(&axe)
        .args(after);
    let driven = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&driven.stdout);
    let stderr = String::from_utf8_lossy(&driven.stderr);
    assert!(
        driven.status.success(),
        "{script} failed ({}):\n{stdout}\n{stderr}\nserver:\n{}",
        driven.status,
        server.stderr()
    );
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{script} printed {stdout}: {e}"));
    for page in summary["pages"].as_array().unwrap() {
        let shot = screenshots.join(format!("{}.png", page.as_str().unwrap()));
        assert!(shot.exists(), "{}", shot.display());
    }
    summary
}
