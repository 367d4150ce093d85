//! The crate boundaries the architecture draws, checked on the manifests: gateways and the
//! scheduler reach the actor host only through the service layer, so neither may depend on the
//! actor host or on the run machine (tests aside).

use std::collections::BTreeSet;
use std::path::Path;

/// The names in a manifest's `[dependencies]` table (not dev- or build-dependencies).
fn dependencies(crate_dir: &str) -> BTreeSet<String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(crate_dir)
        .join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let mut section = String::new();
    let mut names = BTreeSet::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_string();
            continue;
        }
        if section == "[dependencies]"
            && let Some((name, _)) = line.split_once('=')
        {
            names.insert(name.trim().trim_end_matches(".workspace").to_string());
        }
    }
    names
}

#[test]
fn gateways_and_the_scheduler_see_the_service_layer_not_the_actor_host() {
    for role in ["gateway", "scheduler"] {
        let names = dependencies(role);
        assert!(names.contains("agentprocess-service"), "{role}: {names:?}");
        for forbidden in ["agentprocess-run-actor", "agentprocess-machine"] {
            assert!(!names.contains(forbidden), "{role} depends on {forbidden}");
        }
    }
}

#[test]
fn the_service_layer_and_org_state_do_not_depend_on_the_actor_host() {
    for layer in ["service", "org", "machine"] {
        let names = dependencies(layer);
        assert!(
            !names.contains("agentprocess-run-actor"),
            "{layer} depends on the actor host"
        );
    }
}

#[test]
fn the_ids_and_the_store_sit_below_every_protocol_crate() {
    for leaf in ["ids", "store"] {
        let ours: Vec<String> = dependencies(leaf)
            .into_iter()
            .filter(|name| name.starts_with("agentprocess-") && name != "agentprocess-ids")
            .collect();
        assert!(ours.is_empty(), "{leaf} depends on {ours:?}");
    }
}
