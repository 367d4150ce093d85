//! The processes the runner brings (the repository's `examples/`), built in, with the role
//! bindings it expects: every role bound to the group of the same name.

use agentprocess_process::{Offer, Process, load};
use std::collections::BTreeMap;
use std::path::Path;

macro_rules! examples {
    ($($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!("../../examples/", $name, "/PROCESS.md")))),*]
    };
}

/// Every process of the runner: its name and its `PROCESS.md`.
pub const PROCESSES: &[(&str, &str)] = examples![
    "account-closure",
    "audit-remediation",
    "contractor-setup",
    "defect-triage",
    "office-opening",
    "partner-screening",
    "policy-update",
    "product-launch",
    "purchase-request",
    "refund-request",
    "release-notes",
    "service-restoration",
    "training-request",
    "venue-booking",
];

/// A process of the runner, parsed.
pub fn process(name: &str) -> Process {
    let (_, text) = PROCESSES
        .iter()
        .find(|(candidate, _)| *candidate == name)
        .unwrap_or_else(|| panic!("{name} is not a process of the runner"));
    load(text.as_bytes(), &Offer::EVERYTHING)
        .unwrap_or_else(|issues| panic!("the built-in {name} does not load: {issues:?}"))
        .process
}

/// The roles of `name` and the group each is bound to (the group named like the role).
pub fn bindings(name: &str) -> BTreeMap<String, String> {
    process(name)
        .role_names()
        .into_iter()
        .map(|role| (role.to_owned(), role.to_owned()))
        .collect()
}

/// Every group any binding names: the groups the runner's person must belong to.
pub fn all_groups() -> Vec<String> {
    let mut groups: Vec<String> = PROCESSES
        .iter()
        .flat_map(|(name, _)| bindings(name).into_values())
        .collect();
    groups.sort();
    groups.dedup();
    groups
}

/// Writes every process to `DIR/NAME/PROCESS.md` and the bindings to `DIR/bindings.json`
/// (`{ process: { role: group } }`), so the operator of any server can import them.
pub fn write_all(dir: &Path) -> std::io::Result<()> {
    let mut all = BTreeMap::new();
    for (name, text) in PROCESSES {
        let folder = dir.join(name);
        std::fs::create_dir_all(&folder)?;
        std::fs::write(folder.join("PROCESS.md"), text)?;
        all.insert(*name, bindings(name));
    }
    let json = serde_json::to_string_pretty(&all).expect("bindings serialize");
    std::fs::write(dir.join("bindings.json"), json + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_process_loads_and_is_the_example_of_its_name() {
        for (name, text) in PROCESSES {
            assert_eq!(process(name).name.as_str(), *name);
            let on_disk = std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("examples")
                    .join(name)
                    .join("PROCESS.md"),
            )
            .unwrap();
            assert_eq!(&on_disk, text);
        }
        let on_disk = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples"))
            .unwrap()
            .count();
        assert_eq!(on_disk, PROCESSES.len(), "every example is built in");
    }

    #[test]
    fn written_processes_read_back_with_their_bindings() {
        let dir = tempfile::tempdir().unwrap();
        write_all(dir.path()).unwrap();
        let bindings: BTreeMap<String, BTreeMap<String, String>> =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("bindings.json")).unwrap())
                .unwrap();
        assert_eq!(bindings["purchase-request"]["budget-owner"], "budget-owner");
        assert!(bindings["refund-request"].contains_key("refund-desk"));
        let text = std::fs::read_to_string(dir.path().join("product-launch/PROCESS.md")).unwrap();
        assert!(text.contains("parallel: [engineering_ready, marketing_ready, support_ready]"));
    }
}
