//! UTC timestamps as milliseconds since the Unix epoch, with RFC 3339 parsing and rendering.
//!
//! The run machine never reads the clock: the runtime passes `now` in the context.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A UTC instant in milliseconds since 1970-01-01T00:00:00Z.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(i64);

const MILLIS_PER_DAY: i64 = 86_400_000;

impl Timestamp {
    pub const fn from_millis(millis: i64) -> Self {
        Timestamp(millis)
    }

    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// This instant plus `seconds`, saturating.
    pub fn plus_seconds(self, seconds: u64) -> Self {
        let millis = i64::try_from(seconds).unwrap_or(i64::MAX).saturating_mul(1000);
        Timestamp(self.0.saturating_add(millis))
    }

    /// Parses an RFC 3339 date-time with an offset (`Z` or `±HH:MM`); `None` for anything else,
    /// including impossible calendar dates. Fractions beyond milliseconds are truncated.
    pub fn parse_rfc3339(text: &str) -> Option<Self> {
        let b = text.as_bytes();
        if b.len() < 20 {
            return None;
        }
        let num = |range: std::ops::Range<usize>| -> Option<i64> {
            let part = b.get(range)?;
            if part.iter().all(u8::is_ascii_digit) {
                std::str::from_utf8(part).ok()?.parse().ok()
            } else {
                None
            }
        };
        if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') || b[13] != b':' || b[16] != b':' {
            return None;
        }
        let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&month) || day < 1 || day > calendar_days_in_month(year, month) {
            return None;
        }
        if hour > 23 || minute > 59 || second > 60 {
            return None;
        }
        let mut position = 19;
        let mut millis = 0i64;
        if b[position] == b'.' {
            position += 1;
            let start = position;
            while position < b.len() && b[position].is_ascii_digit() {
                position += 1;
            }
            if position == start {
                return None;
            }
            let digits = &text[start..position.min(start + 3)];
            millis = digits.parse::<i64>().ok()? * 10i64.pow(3 - digits.len() as u32);
        }
        let offset_minutes = match b.get(position)? {
            b'Z' | b'z' if position + 1 == b.len() => 0,
            sign @ (b'+' | b'-') if position + 6 == b.len() && b[position + 3] == b':' => {
                let hours = num(position + 1..position + 3)?;
                let minutes = num(position + 4..position + 6)?;
                if hours > 23 || minutes > 59 {
                    return None;
                }
                let total = hours * 60 + minutes;
                if *sign == b'-' { -total } else { total }
            }
            _ => return None,
        };
        let days = days_from_civil(year, month, day);
        let seconds_of_day = hour * 3600 + minute * 60 + second.min(59);
        let local = days * MILLIS_PER_DAY + seconds_of_day * 1000 + millis;
        Some(Timestamp(local - offset_minutes * 60_000))
    }

    /// `YYYY-MM-DDTHH:MM:SSZ`, with `.mmm` only when the milliseconds are not zero.
    pub fn to_rfc3339(self) -> String {
        let days = self.0.div_euclid(MILLIS_PER_DAY);
        let rest = self.0.rem_euclid(MILLIS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        let seconds = rest / 1000;
        let millis = rest % 1000;
        let (hour, minute, second) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
        if millis == 0 {
            format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z")
        } else {
            format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z")
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

/// [`days_in_month`] for the wider integers a parse works in; 0 for a negative year or month.
fn calendar_days_in_month(year: i64, month: i64) -> i64 {
    let (Ok(year), Ok(month)) = (u32::try_from(year), u32::try_from(month)) else {
        return 0;
    };
    i64::from(days_in_month(year, month))
}

/// Days in `month` (1–12) of a proleptic Gregorian `year`; the one calendar rule of the server
/// (`date` values of the process model, and [`Timestamp`] parsing).
pub fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn is_leap_year(year: u32) -> bool {
    (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_and_parses_round_trip() {
        let t = Timestamp::parse_rfc3339("2026-10-06T09:00:00Z").unwrap();
        assert_eq!(t.to_rfc3339(), "2026-10-06T09:00:00Z");
        let t = Timestamp::parse_rfc3339("2026-10-06T11:00:00.5+02:00").unwrap();
        assert_eq!(t.to_rfc3339(), "2026-10-06T09:00:00.500Z");
        assert_eq!(Timestamp::from_millis(0).to_rfc3339(), "1970-01-01T00:00:00Z");
        assert_eq!(
            Timestamp::parse_rfc3339("2024-02-29T00:00:00-00:30")
                .unwrap()
                .to_rfc3339(),
            "2024-02-29T00:30:00Z"
        );
    }

    #[test]
    fn refuses_what_is_not_rfc_3339_with_offset() {
        for text in [
            "2026-10-06",
            "2026-10-06T09:00:00",
            "2026-02-30T09:00:00Z",
            "2026-10-06 09:00:00Z",
            "2026-10-06T24:00:00Z",
            "2026-10-06T09:00:00+0200",
            "2026-10-06T09:00:00.Z",
        ] {
            assert_eq!(Timestamp::parse_rfc3339(text), None, "{text}");
        }
    }
}
