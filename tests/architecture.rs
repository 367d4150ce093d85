//! The crate boundaries the architecture draws, checked on the manifests as Cargo reads them:
//! only the actor host applies the run machine's rules, so nothing else links it, directly or
//! through another crate; gateways and the scheduler reach runs through the
//! service layer; the vocabulary every role shares sits in leaf crates.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// A workspace's crates and, for each, the names of the crates it depends on, as Cargo reads
/// its manifest: every form (`name = ...`, `[dependencies.name]`, renamed, `[target.*]`), and
/// each with its kind.
struct Workspace {
    dependencies: BTreeMap<String, Vec<Dependency>>,
}

struct Dependency {
    name: String,
    /// `normal`, `build` or `dev`.
    kind: String,
}

impl Workspace {
    fn read(manifest_dir: &Path) -> Workspace {
        let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["metadata", "--no-deps", "--format-version", "1", "--offline"])
            .current_dir(manifest_dir)
            .output()
            .expect("cargo metadata runs");
        assert!(
            output.status.success(),
            "cargo metadata: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
        let mut dependencies = BTreeMap::new();
        for package in metadata["packages"].as_array().unwrap() {
            let declared = package["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .map(|dependency| Dependency {
                    name: dependency["name"].as_str().unwrap().to_string(),
                    kind: dependency["kind"].as_str().unwrap_or("normal").to_string(),
                })
                .collect();
            dependencies.insert(package["name"].as_str().unwrap().to_string(), declared);
        }
        Workspace { dependencies }
    }

    fn ours() -> Workspace {
        Workspace::read(Path::new(env!("CARGO_MANIFEST_DIR")))
    }

    /// The crates `name` links in a build (normal and build dependencies, not dev), directly or
    /// through another crate of the workspace.
    fn linked_by(&self, name: &str) -> BTreeSet<String> {
        let mut linked = BTreeSet::new();
        let mut next = vec![name.to_string()];
        while let Some(current) = next.pop() {
            for dependency in self.dependencies.get(&current).into_iter().flatten() {
                if dependency.kind != "dev" && linked.insert(dependency.name.clone()) {
                    next.push(dependency.name.clone());
                }
            }
        }
        linked
    }

    /// The workspace's own crates that `name` depends on directly (any kind but dev).
    fn direct_ours(&self, name: &str) -> BTreeSet<String> {
        self.dependencies[name]
            .iter()
            .filter(|dependency| dependency.kind != "dev" && self.dependencies.contains_key(&dependency.name))
            .map(|dependency| dependency.name.clone())
            .collect()
    }
}

#[test]
fn nothing_but_the_actor_host_and_the_binary_links_the_run_machine() {
    let workspace = Workspace::ours();
    let allowed = ["agentprocess-machine", "agentprocess-run-actor", "agentprocess"];
    let mut offenders = Vec::new();
    for name in workspace.dependencies.keys() {
        if !allowed.contains(&name.as_str()) && workspace.linked_by(name).contains("agentprocess-machine") {
            offenders.push(name.clone());
        }
    }
    assert!(
        offenders.is_empty(),
        "these crates link the run machine: {offenders:?}"
    );
    assert!(
        workspace
            .linked_by("agentprocess-run-actor")
            .contains("agentprocess-machine")
    );
}

#[test]
fn gateways_and_the_scheduler_reach_runs_through_the_service_layer() {
    let workspace = Workspace::ours();
    for role in ["agentprocess-gateway", "agentprocess-scheduler"] {
        let linked = workspace.linked_by(role);
        assert!(linked.contains("agentprocess-service"), "{role}: {linked:?}");
        assert!(
            !linked.contains("agentprocess-run-actor"),
            "{role} links the actor host"
        );
    }
}

#[test]
fn the_service_layer_and_org_state_do_not_depend_on_the_actor_host() {
    let workspace = Workspace::ours();
    for layer in ["agentprocess-service", "agentprocess-org"] {
        let linked = workspace.linked_by(layer);
        assert!(!linked.contains("agentprocess-run-actor"), "{layer}: {linked:?}");
    }
}

#[test]
fn the_ids_the_vocabulary_and_the_store_sit_below_every_protocol_crate() {
    let workspace = Workspace::ours();
    for (leaf, may_use) in [
        ("agentprocess-ids", &[][..]),
        ("agentprocess-vocab", &["agentprocess-ids"][..]),
        ("agentprocess-store", &["agentprocess-ids"][..]),
    ] {
        let ours: Vec<String> = workspace
            .direct_ours(leaf)
            .into_iter()
            .filter(|name| !may_use.contains(&name.as_str()))
            .collect();
        assert!(ours.is_empty(), "{leaf} depends on {ours:?}");
    }
}

/// The reading above sees every way a manifest can name a dependency: a line of its own, a
/// table of its own, and a dependency of one target only.
#[test]
fn every_form_of_a_dependency_counts() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "Cargo.toml",
        "[workspace]\nmembers = [\"top\", \"inline\", \"table\", \"unix\", \"deep\"]\nresolver = \"3\"\n",
    );
    for name in ["inline", "table", "unix", "deep"] {
        write(
            &format!("{name}/Cargo.toml"),
            &format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n"),
        );
        write(&format!("{name}/src/lib.rs"), "");
    }
    write(
        "top/Cargo.toml",
        "[package]\nname = \"top\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
         [dependencies]\ninline = { path = \"../inline\" }\n\n\
         [dependencies.table]\npath = \"../table\"\n\n\
         [target.'cfg(unix)'.dependencies]\nunix = { path = \"../unix\" }\n",
    );
    write("top/src/lib.rs", "");
    write(
        "unix/Cargo.toml",
        "[package]\nname = \"unix\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
         [build-dependencies]\ndeep = { path = \"../deep\" }\n",
    );
    let workspace = Workspace::read(dir.path());
    let linked = workspace.linked_by("top");
    let expected: BTreeSet<String> = ["inline", "table", "unix", "deep"].map(String::from).into();
    assert_eq!(linked, expected);
}
