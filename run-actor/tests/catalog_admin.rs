//! The operators' side of the catalog (spec §7 packages, §6.5 immutability): drafts imported and
//! validated against what the server offers, roles bound to groups, versions published with
//! their content hash, and listings that never show another organization's processes.

use agentprocess_ids::OrgId;
use agentprocess_process::Offer;
use agentprocess_run_actor::machine::Timestamp;
use agentprocess_run_actor::runtime::{
    CatalogError, CatalogRefusal, Clock, LocalBlobs, Runtime, RuntimeConfig,
};
use agentprocess_store::{EmbeddedOptions, EmbeddedStore};
use indexmap::IndexMap;
use std::sync::Arc;

const ORG: &str = "acme";
const OPERATOR: &str = "ops@acme.test";
/// 2026-10-01T00:00:00Z.
const START: Timestamp = Timestamp::from_millis(1_790_812_800_000);

/// A server that offers everything but `check-1` (no evaluator configured).
const NO_CHECK: Offer = Offer {
    check: false,
    ..Offer::EVERYTHING
};

fn runtime(blobs: &std::path::Path) -> Runtime {
    runtime_on(
        Arc::new(EmbeddedStore::in_memory(EmbeddedOptions::default())),
        blobs,
    )
}

fn runtime_on(store: Arc<EmbeddedStore>, blobs: &std::path::Path) -> Runtime {
    Runtime::new(
        store,
        Arc::new(LocalBlobs::new(blobs)),
        RuntimeConfig::default(),
        Clock::starting_at(START),
    )
}

/// The source of our example process `name` (`examples/NAME/PROCESS.md`).
fn example(name: &str) -> Vec<u8> {
    std::fs::read(agentprocess_testkit::example(name)).unwrap()
}

fn bindings(pairs: &[(&str, &str)]) -> IndexMap<String, String> {
    pairs
        .iter()
        .map(|(role, group)| (role.to_string(), group.to_string()))
        .collect()
}

fn refusal<T: std::fmt::Debug>(result: Result<T, CatalogError>) -> CatalogRefusal {
    match result {
        Err(CatalogError::Refused(refusal)) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn issues(refusal: CatalogRefusal) -> Vec<String> {
    match refusal {
        CatalogRefusal::Invalid(issues) => issues.iter().map(ToString::to_string).collect(),
        other => panic!("expected invalid, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn an_import_becomes_a_draft_with_hash_roles_and_no_bindings() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path());
    let source = example("purchase-request");
    let draft = runtime
        .catalog()
        .import_draft(&OrgId::from(ORG), &source, &NO_CHECK, OPERATOR)
        .await
        .unwrap();
    let expected_hash = agentprocess_process::load(&source, &Offer::EVERYTHING)
        .unwrap()
        .hash
        .to_hex();
    assert_eq!(draft.name, "purchase-request");
    assert_eq!(draft.content_hash, expected_hash);
    assert_eq!(draft.roles.len(), 2);
    assert!(draft.roles.contains(&"executive".to_string()));
    assert!(draft.bindings.is_empty());
    assert_eq!(draft.unbound(), draft.roles);
    assert_eq!(draft.imported_at, "2026-10-01T00:00:00Z");
    assert_eq!(draft.imported_by, OPERATOR);

    // Stored: the listing shows it, and nothing is published.
    let entry = runtime
        .catalog()
        .process(&OrgId::from(ORG), "purchase-request")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(entry.latest_version, None);
    assert!(entry.versions.is_empty());
    assert_eq!(entry.draft, Some(draft.view()));
    assert!(
        runtime
            .catalog()
            .latest_version(&OrgId::from(ORG), "purchase-request")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(start_paused = true)]
async fn an_invalid_source_is_refused_with_every_issue_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path());
    let source = b"---\nname: Bad_Name\ndescription: x\ncolour: blue\nsteps:\n  - id: a\n    agent: Do it.\n    next: nowhere\n---\n";
    let found = issues(refusal(
        runtime
            .catalog()
            .import_draft(&OrgId::from(ORG), source, &NO_CHECK, OPERATOR)
            .await,
    ));
    assert!(found.len() >= 3, "{found:?}");
    assert!(found.iter().any(|i| i.starts_with("name")), "{found:?}");
    assert!(found.iter().any(|i| i.contains("colour")), "{found:?}");
    assert!(found.iter().any(|i| i.contains("nowhere")), "{found:?}");
    assert!(
        runtime
            .catalog()
            .processes(&OrgId::from(ORG))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(start_paused = true)]
async fn a_profile_the_server_does_not_offer_is_refused_at_import() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path());
    let source = example("partner-screening");
    let found = issues(refusal(
        runtime
            .catalog()
            .import_draft(&OrgId::from(ORG), &source, &NO_CHECK, OPERATOR)
            .await,
    ));
    assert!(found.iter().any(|i| i.contains("check")), "{found:?}");
    runtime
        .catalog()
        .import_draft(&OrgId::from(ORG), &source, &Offer::EVERYTHING, OPERATOR)
        .await
        .expect("valid where check-1 is offered");
    // The offer shrank (the evaluator went away) before publication: publishing re-validates.
    runtime
        .catalog()
        .bind_roles(
            &OrgId::from(ORG),
            "partner-screening",
            &bindings(&[("partnerships-manager", "g_fin")]),
        )
        .await
        .unwrap();
    let found = issues(refusal(
        runtime
            .catalog()
            .publish_draft(&OrgId::from(ORG), "partner-screening", &NO_CHECK, OPERATOR)
            .await,
    ));
    assert!(found.iter().any(|i| i.contains("check")), "{found:?}");
}

#[tokio::test(start_paused = true)]
async fn bindings_refuse_unknown_roles_and_empty_groups_with_every_issue() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path());
    let catalog = runtime.catalog();
    catalog
        .import_draft(
            &OrgId::from(ORG),
            &example("purchase-request"),
            &NO_CHECK,
            OPERATOR,
        )
        .await
        .unwrap();
    let found = issues(refusal(
        catalog
            .bind_roles(
                &OrgId::from(ORG),
                "purchase-request",
                &bindings(&[
                    ("executive", "g_executive"),
                    ("janitor", "g_x"),
                    ("budget-owner", " "),
                ]),
            )
            .await,
    ));
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].starts_with("bindings.janitor: the process has no role"),
        "{found:?}"
    );
    assert!(found[1].starts_with("bindings.budget-owner: the group must not be empty"));
    // Nothing was applied, not even the good binding.
    let entry = catalog
        .process(&OrgId::from(ORG), "purchase-request")
        .await
        .unwrap()
        .unwrap();
    assert!(entry.draft.unwrap().bindings.is_empty());

    // Bindings are set one request at a time and kept, in role order.
    catalog
        .bind_roles(
            &OrgId::from(ORG),
            "purchase-request",
            &bindings(&[("executive", "g_executive")]),
        )
        .await
        .unwrap();
    let draft = catalog
        .bind_roles(
            &OrgId::from(ORG),
            "purchase-request",
            &bindings(&[("budget-owner", "g_fc")]),
        )
        .await
        .unwrap();
    assert_eq!(draft.unbound(), Vec::<String>::new());
    assert_eq!(draft.bindings.len(), 2);

    assert_eq!(
        refusal(
            catalog
                .bind_roles(&OrgId::from(ORG), "no-such", &bindings(&[("executive", "g")]))
                .await
        ),
        CatalogRefusal::NoDraft("no-such".into())
    );
}

#[tokio::test(start_paused = true)]
async fn a_reimport_replaces_the_draft_and_keeps_bindings_of_roles_that_remain() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path());
    let catalog = runtime.catalog();
    let first = "---\nname: leave\ndescription: Leave request.\nsteps:\n  - id: ok\n    person: manager\n    approve: Approve it.\n  - id: hr\n    person: hr\n    approve: Record it.\n  - id: done\n    finish: done\n---\n";
    catalog
        .import_draft(&OrgId::from(ORG), first.as_bytes(), &NO_CHECK, OPERATOR)
        .await
        .unwrap();
    catalog
        .bind_roles(
            &OrgId::from(ORG),
            "leave",
            &bindings(&[("manager", "g_managers"), ("hr", "g_hr")]),
        )
        .await
        .unwrap();
    let second = first.replace("person: hr", "person: payroll");
    let draft = catalog
        .import_draft(&OrgId::from(ORG), second.as_bytes(), &NO_CHECK, OPERATOR)
        .await
        .unwrap();
    assert_eq!(draft.roles, vec!["manager", "payroll"]);
    assert_eq!(draft.bindings, bindings(&[("manager", "g_managers")]));
    assert_eq!(draft.unbound(), vec!["payroll"]);
    assert_eq!(catalog.processes(&OrgId::from(ORG)).await.unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn publishing_refuses_every_unbound_role_then_makes_numbered_versions() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path());
    let catalog = runtime.catalog();
    let source = example("policy-update");
    let draft = catalog
        .import_draft(&OrgId::from(ORG), &source, &NO_CHECK, OPERATOR)
        .await
        .unwrap();
    let found = issues(refusal(
        catalog
            .publish_draft(&OrgId::from(ORG), "policy-update", &NO_CHECK, OPERATOR)
            .await,
    ));
    assert_eq!(found.len(), 3, "one issue per unbound role: {found:?}");
    for role in &draft.roles {
        assert!(
            found.iter().any(|i| i.starts_with(&format!("bindings.{role}:"))),
            "{found:?}"
        );
    }
    let all: IndexMap<String, String> = draft
        .roles
        .iter()
        .map(|r| (r.clone(), format!("g_{r}")))
        .collect();
    catalog
        .bind_roles(&OrgId::from(ORG), "policy-update", &all)
        .await
        .unwrap();

    let v1 = catalog
        .publish_draft(&OrgId::from(ORG), "policy-update", &NO_CHECK, OPERATOR)
        .await
        .unwrap();
    assert_eq!(v1.name, "policy-update");
    assert_eq!(v1.version.version, 1);
    assert_eq!(v1.version.content_hash, draft.content_hash);
    assert_eq!(v1.version.published_at, "2026-10-01T00:00:00Z");
    assert_eq!(v1.version.published_by.as_deref(), Some(OPERATOR));
    assert_eq!(v1.version.roles, all);
    // It is the latest version, with the bindings.
    let latest = catalog
        .latest_version(&OrgId::from(ORG), "policy-update")
        .await
        .unwrap();
    let record = catalog
        .published_record(&OrgId::from(ORG), "policy-update", 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((latest, &record.roles), (Some(1), &all));

    // Same content and bindings as the latest version: nothing to publish.
    assert_eq!(
        refusal(
            catalog
                .publish_draft(&OrgId::from(ORG), "policy-update", &NO_CHECK, OPERATOR)
                .await
        ),
        CatalogRefusal::Unchanged {
            name: "policy-update".into(),
            version: 1
        }
    );
    // A binding change alone is a new version; the old one is unchanged.
    runtime.clock().advance(std::time::Duration::from_secs(60));
    catalog
        .bind_roles(
            &OrgId::from(ORG),
            "policy-update",
            &bindings(&[("compliance-reviewer", "g_compliance2")]),
        )
        .await
        .unwrap();
    let v2 = catalog
        .publish_draft(&OrgId::from(ORG), "policy-update", &NO_CHECK, "other@acme.test")
        .await
        .unwrap();
    assert_eq!(v2.version.version, 2);
    assert_eq!(v2.version.published_at, "2026-10-01T00:01:00Z");
    let entry = catalog
        .process(&OrgId::from(ORG), "policy-update")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(entry.latest_version, Some(2));
    assert_eq!(entry.versions, vec![v1.version.clone(), v2.version.clone()]);
    assert_eq!(
        catalog
            .published_record(&OrgId::from(ORG), "policy-update", 1)
            .await
            .unwrap()
            .unwrap()
            .roles,
        all
    );
    assert!(entry.draft.is_some(), "the draft stays after publication");

    assert_eq!(
        refusal(
            catalog
                .publish_draft(&OrgId::from(ORG), "nothing", &NO_CHECK, OPERATOR)
                .await
        ),
        CatalogRefusal::NoDraft("nothing".into())
    );
}

#[tokio::test(start_paused = true)]
async fn the_listing_is_sorted_by_name_and_shows_drafts_and_versions() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path());
    let catalog = runtime.catalog();
    for name in ["defect-triage", "release-notes", "audit-remediation"] {
        let draft = catalog
            .import_draft(&OrgId::from(ORG), &example(name), &NO_CHECK, OPERATOR)
            .await
            .unwrap();
        if name != "defect-triage" {
            let all = draft
                .roles
                .iter()
                .map(|r| (r.clone(), format!("g_{r}")))
                .collect();
            catalog.bind_roles(&OrgId::from(ORG), name, &all).await.unwrap();
            catalog
                .publish_draft(&OrgId::from(ORG), name, &NO_CHECK, OPERATOR)
                .await
                .unwrap();
        }
    }
    let listed = catalog.processes(&OrgId::from(ORG)).await.unwrap();
    let names: Vec<&str> = listed.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["audit-remediation", "defect-triage", "release-notes"]);
    assert_eq!(listed[0].latest_version, Some(1));
    assert_eq!(listed[2].latest_version, Some(1));
    assert_eq!(listed[1].latest_version, None);
    assert!(listed[1].draft.as_ref().unwrap().unbound.len() == 2);
    assert!(!listed[1].description.is_empty());
    assert!(listed.iter().all(|p| p.draft.is_some()));
}

#[tokio::test(start_paused = true)]
async fn another_organization_sees_none_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path());
    let catalog = runtime.catalog();
    catalog
        .import_draft(&OrgId::from(ORG), &example("release-notes"), &NO_CHECK, OPERATOR)
        .await
        .unwrap();
    catalog
        .bind_roles(
            &OrgId::from(ORG),
            "release-notes",
            &bindings(&[("product-manager", "g_product-managers")]),
        )
        .await
        .unwrap();
    catalog
        .publish_draft(&OrgId::from(ORG), "release-notes", &NO_CHECK, OPERATOR)
        .await
        .unwrap();
    assert!(
        catalog
            .processes(&OrgId::from("globex"))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        catalog
            .process(&OrgId::from("globex"), "release-notes")
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        refusal(
            catalog
                .bind_roles(
                    &OrgId::from("globex"),
                    "release-notes",
                    &bindings(&[("product-manager", "g")])
                )
                .await
        ),
        CatalogRefusal::NoDraft("release-notes".into())
    );
    assert_eq!(
        refusal(
            catalog
                .publish_draft(&OrgId::from("globex"), "release-notes", &NO_CHECK, OPERATOR)
                .await
        ),
        CatalogRefusal::NoDraft("release-notes".into())
    );
    // Its own import of the same process starts at version 1.
    catalog
        .import_draft(
            &OrgId::from("globex"),
            &example("release-notes"),
            &NO_CHECK,
            OPERATOR,
        )
        .await
        .unwrap();
    catalog
        .bind_roles(
            &OrgId::from("globex"),
            "release-notes",
            &bindings(&[("product-manager", "g_globex")]),
        )
        .await
        .unwrap();
    let published = catalog
        .publish_draft(&OrgId::from("globex"), "release-notes", &NO_CHECK, OPERATOR)
        .await
        .unwrap();
    assert_eq!(published.version.version, 1);
    let ours = catalog
        .process(&OrgId::from(ORG), "release-notes")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        ours.versions[0].roles,
        bindings(&[("product-manager", "g_product-managers")])
    );
}

#[tokio::test(start_paused = true)]
async fn the_direct_publish_refuses_every_unbound_role() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path());
    let found = issues(refusal(
        runtime
            .publish(&OrgId::from(ORG), &example("policy-update"), IndexMap::new())
            .await,
    ));
    assert_eq!(found.len(), 3, "{found:?}");
}

#[tokio::test(start_paused = true)]
async fn every_example_imports_binds_and_publishes() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path());
    let catalog = runtime.catalog();
    let examples = agentprocess_testkit::examples();
    assert!(
        examples.len() >= 12,
        "at least twelve examples, found {}",
        examples.len()
    );
    for (name, path) in &examples {
        let draft = catalog
            .import_draft(
                &OrgId::from(ORG),
                &std::fs::read(path).unwrap(),
                &Offer::EVERYTHING,
                OPERATOR,
            )
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let all = draft
            .roles
            .iter()
            .map(|r| (r.clone(), format!("g_{r}")))
            .collect();
        catalog
            .bind_roles(&OrgId::from(ORG), &draft.name, &all)
            .await
            .unwrap();
        catalog
            .publish_draft(&OrgId::from(ORG), &draft.name, &Offer::EVERYTHING, OPERATOR)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let listed = catalog.processes(&OrgId::from(ORG)).await.unwrap();
    assert_eq!(listed.len(), examples.len());
    assert!(listed.iter().all(|p| p.latest_version == Some(1)));
}

#[tokio::test(start_paused = true)]
async fn a_store_failure_is_not_a_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::in_memory(EmbeddedOptions::default()));
    let runtime = runtime_on(store.clone(), dir.path());
    let catalog = runtime.catalog();
    catalog
        .import_draft(&OrgId::from(ORG), &example("release-notes"), &NO_CHECK, OPERATOR)
        .await
        .unwrap();
    store.close().await;
    let failed = |result: Result<_, CatalogError>| matches!(result, Err(CatalogError::Failed(_)));
    assert!(failed(
        catalog
            .import_draft(&OrgId::from(ORG), &example("release-notes"), &NO_CHECK, OPERATOR)
            .await
            .map(|_| ())
    ));
    assert!(failed(
        catalog
            .bind_roles(
                &OrgId::from(ORG),
                "release-notes",
                &bindings(&[("product-manager", "g")])
            )
            .await
            .map(|_| ())
    ));
    assert!(failed(
        catalog
            .publish_draft(&OrgId::from(ORG), "release-notes", &NO_CHECK, OPERATOR)
            .await
            .map(|_| ())
    ));
    assert!(catalog.processes(&OrgId::from(ORG)).await.is_err());
    assert!(catalog.process(&OrgId::from(ORG), "release-notes").await.is_err());
    // An invalid source is still a refusal: it is refused before the store is asked.
    assert!(matches!(
        catalog
            .import_draft(&OrgId::from(ORG), b"nope", &NO_CHECK, OPERATOR)
            .await,
        Err(CatalogError::Refused(CatalogRefusal::Invalid(_)))
    ));
}
