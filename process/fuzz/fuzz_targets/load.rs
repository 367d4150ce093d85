//! Fuzzes the whole pipeline a publish runs: parse, validate, hash. It must never panic or hang.

#![no_main]

use agentprocess_process::{Offer, load};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(loaded) = load(data, &Offer::EVERYTHING) {
        // A loaded process is named by the hash of what it was made from.
        let again = agentprocess_process::content_hash(&loaded.frontmatter, &loaded.body);
        assert_eq!(loaded.hash, again);
    }
});
