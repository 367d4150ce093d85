//! Points in time on the pages: RFC 3339 from the tools shown to people, and what is past due.

use agentprocess_service::Timestamp;
use maud::{Markup, html};
use std::time::{SystemTime, UNIX_EPOCH};

/// This server's time now.
pub fn now() -> Timestamp {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    Timestamp::from_millis(millis)
}

/// Whether the RFC 3339 time `at` is before `now`; `false` when it does not parse.
pub fn is_before(at: &str, now: Timestamp) -> bool {
    Timestamp::parse_rfc3339(at).is_some_and(|at| at < now)
}

/// `at` as a `<time>` element reading like `2026-10-06 09:04:12 UTC`, keeping the exact value.
pub fn time(at: &str) -> Markup {
    html! { time datetime=(at) { (readable(at)) } }
}

/// An RFC 3339 time as people read it: date and second, in UTC; any other text as it is.
pub fn readable(at: &str) -> String {
    match Timestamp::parse_rfc3339(at) {
        Some(parsed) => {
            let utc = parsed.to_rfc3339();
            format!("{} {} UTC", &utc[..10], &utc[11..19])
        }
        None => at.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_date_and_second_in_utc() {
        assert_eq!(readable("2026-10-06T09:04:12Z"), "2026-10-06 09:04:12 UTC");
        assert_eq!(readable("2026-10-06T09:04:12.345Z"), "2026-10-06 09:04:12 UTC");
        assert_eq!(readable("2026-10-06T11:04:12+02:00"), "2026-10-06 09:04:12 UTC");
        assert_eq!(readable(""), "");
        assert_eq!(readable("soon"), "soon");
        let now = Timestamp::parse_rfc3339("2026-10-06T09:00:00Z").unwrap();
        assert!(is_before("2026-10-06T08:59:59Z", now));
        assert!(!is_before("2026-10-06T09:00:01Z", now));
        assert!(!is_before("never", now));
    }
}
