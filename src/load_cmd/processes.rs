//! The benchmark processes the load generator publishes before it starts: their PROCESS.md texts.

/// The name of the process with one agent step.
pub const AGENT_STEP: &str = "load-agent-step";
/// The name of the process with an agent step and then an approval.
pub const APPROVAL: &str = "load-approval";
/// The name of the process whose runs the idle agents wait for (`--wake-every`).
pub const WAKE: &str = "load-wake";
/// The role of the approval step, bound to [`APPROVERS_GROUP`] when the process is published.
pub const APPROVER_ROLE: &str = "approver";
/// The group every person of the load generator belongs to.
pub const APPROVERS_GROUP: &str = "load-approvers";

/// One agent step with a small declared output, then finish.
pub const AGENT_STEP_TEXT: &str = "---
name: load-agent-step
description: One agent step with a small output, then finish. Published by the load generator.
inputs:
  n: number
steps:
  - id: work
    agent: Return the number n from the inputs as the result.
    output:
      result: number
  - id: done
    finish: done
---

# Load: one agent step

The load generator starts this process, claims the step and submits it, as fast as the server
takes it.
";

/// An agent step, then an approval by the role [`APPROVER_ROLE`], then finish.
pub const APPROVAL_TEXT: &str = "---
name: load-approval
description: One agent step, then a person approves it. Published by the load generator.
inputs:
  n: number
steps:
  - id: work
    agent: Return the number n from the inputs as the result.
    output:
      result: number
  - id: approve
    person: approver
    approve: Approve when the result is there.
  - id: done
    finish: approved
---

# Load: an agent step and an approval

The load generator's agents do the step; its people approve it.
";

/// One agent step, started now and then for the idle agents waiting for it to hear of.
pub const WAKE_TEXT: &str = "---
name: load-wake
description: One agent step the load generator's idle agents wait for. Published by the load generator.
inputs:
  n: number
steps:
  - id: work
    agent: Return the number n from the inputs as the result.
    output:
      result: number
  - id: done
    finish: done
---

# Load: work for waiting agents

The load generator starts a run of this process now and then; its idle agents, waiting for work
of this process only, must hear of each one.
";

/// The text of the benchmark process `name`.
pub fn text(name: &str) -> Option<&'static str> {
    match name {
        AGENT_STEP => Some(AGENT_STEP_TEXT),
        APPROVAL => Some(APPROVAL_TEXT),
        WAKE => Some(WAKE_TEXT),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentprocess_process::{Offer, PersonRef, load};

    #[test]
    fn every_process_is_valid_on_a_core_only_server() {
        for name in [AGENT_STEP, APPROVAL, WAKE] {
            let loaded = load(text(name).unwrap().as_bytes(), &Offer::CORE)
                .unwrap_or_else(|issues| panic!("{name}: {issues:?}"));
            assert_eq!(loaded.process.name.as_str(), name);
        }
    }

    #[test]
    fn the_agent_step_process_is_one_agent_step_then_finish() {
        let loaded = load(AGENT_STEP_TEXT.as_bytes(), &Offer::CORE).unwrap();
        let kinds: Vec<_> = loaded.process.steps.iter().map(|s| s.kind_name()).collect();
        assert_eq!(kinds, ["agent", "finish"]);
    }

    #[test]
    fn the_approval_process_asks_the_approver_role() {
        let loaded = load(APPROVAL_TEXT.as_bytes(), &Offer::CORE).unwrap();
        let kinds: Vec<_> = loaded.process.steps.iter().map(|s| s.kind_name()).collect();
        assert_eq!(kinds, ["agent", "approve", "finish"]);
        assert_eq!(
            loaded.process.steps[1].person(),
            Some(&PersonRef::Role(APPROVER_ROLE.to_owned()))
        );
    }

    #[test]
    fn only_the_benchmark_processes_have_a_text() {
        assert!(text("partner-screening").is_none());
    }
}
