//! Run state is what the runtime stores: it must survive a round trip through JSON exactly.

mod common;

use agentprocess_run_actor::machine::{Command, RunState};
use common::*;

#[test]
fn run_state_round_trips_through_json_with_numbers_exact() {
    let mut world = World::new(supplier_onboarding());
    let inputs: serde_json::Value =
        serde_json::from_str(r#"{ "vendorName": "Acme", "amount": 12345678901234567890.000000000001 }"#)
            .unwrap();
    world.start(mira(), inputs).unwrap();
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    world
        .apply(Command::Renew {
            caller: agent("a_screener"),
            token,
            progress: Some("half".into()),
        })
        .unwrap();
    let stored = serde_json::to_string(world.run()).unwrap();
    let loaded: RunState = serde_json::from_str(&stored).unwrap();
    assert_eq!(&loaded, world.run());
    assert!(stored.contains("12345678901234567890.000000000001"));
    assert_eq!(serde_json::to_string(&loaded).unwrap(), stored);
}
