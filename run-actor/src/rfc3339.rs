//! Serde for a [`Timestamp`] stored as RFC 3339 text, as every stored record writes it.

use crate::machine::Timestamp;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serializer};

pub fn serialize<S: Serializer>(at: &Timestamp, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&at.to_rfc3339())
}

pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Timestamp, D::Error> {
    let text = String::deserialize(deserializer)?;
    Timestamp::parse_rfc3339(&text)
        .ok_or_else(|| D::Error::custom(format!("{text:?} is not an RFC 3339 date-time")))
}
