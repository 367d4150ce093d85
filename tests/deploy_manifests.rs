//! The Kubernetes manifests in `deploy/kubernetes`: each resource validates strictly against
//! Kubernetes' API schemas, and each agentprocess container's arguments parse with the built
//! binary (`tests/python/check_manifests.py`, in the venv `scripts/install-deps.sh` makes).
//! Their settings file loads as the roles load it (a unit test of `settings.rs`).

use std::path::PathBuf;
use std::process::Command;

#[test]
fn the_kubernetes_manifests_validate_and_their_arguments_parse() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("target/py-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/install-deps.sh to create the Python venv",
        python.display()
    );
    let checked = Command::new(&python)
        .arg(root.join("tests/python/check_manifests.py"))
        .arg(env!("CARGO_BIN_EXE_agentprocess"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(
        checked.status.success(),
        "the manifests have problems:\n{stdout}\n{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(stdout.contains("checked 3 agentprocess containers"), "{stdout}");
}
