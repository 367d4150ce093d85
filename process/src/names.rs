//! The name patterns of spec §2: process names, step ids (also event names) and role names.

/// `^[a-z0-9]+(-[a-z0-9]+)*$`, 1–64 characters.
pub fn is_process_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.split('-').all(|part| {
            !part.is_empty() && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// `^[a-z][a-z0-9_-]{0,63}$`: step ids and event names.
pub use agentprocess_ids::is_step_id;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_names_follow_spec_2_1() {
        assert!(is_process_name("supplier-onboarding"));
        assert!(is_process_name("a"));
        assert!(is_process_name("007"));
        assert!(is_process_name(&"a".repeat(64)));
        assert!(!is_process_name(&"a".repeat(65)));
        assert!(!is_process_name(""));
        assert!(!is_process_name("-a"));
        assert!(!is_process_name("a-"));
        assert!(!is_process_name("a--b"));
        assert!(!is_process_name("Supplier"));
        assert!(!is_process_name("a_b"));
        assert!(!is_process_name("é"));
    }

    #[test]
    fn step_ids_follow_spec_2_2() {
        assert!(is_step_id("check_vendor"));
        assert!(is_step_id("a"));
        assert!(is_step_id("a-1_b"));
        assert!(is_step_id(&"a".repeat(64)));
        assert!(!is_step_id(&"a".repeat(65)));
        assert!(!is_step_id(""));
        assert!(!is_step_id("1a"));
        assert!(!is_step_id("_a"));
        assert!(!is_step_id("Approve"));
        assert!(!is_step_id("a.b"));
    }
}
