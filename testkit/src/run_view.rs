//! Reading a rendered run view in tests: a step's entry and its state.

use serde_json::Value;

/// The `steps[]` entry of `step` in a run view; panics, showing the view, when it has none.
pub fn step_of<'a>(view: &'a Value, step: &str) -> &'a Value {
    view["steps"]
        .as_array()
        .unwrap_or_else(|| panic!("no steps in {view}"))
        .iter()
        .find(|s| s["id"] == step)
        .unwrap_or_else(|| panic!("no step {step} in {view}"))
}

/// The state of `step` in a run view (`null` for a step not reached or reset).
pub fn step_state(view: &Value, step: &str) -> Value {
    step_of(view, step)["state"].clone()
}
