//! The PROCESS.md model: parse, validate, hash and check field values. Pure: no IO, no clock.
//!
//! A document goes through [`parse::parse_document`] (split the frontmatter from the body,
//! YAML 1.2 core schema to JSON), then [`validate::validate`] (every rule of spec §2 and of the
//! offered profiles, every issue at once), and is named by [`hash::content_hash`]. [`load`] does
//! all three. [`values::check_values`] checks run inputs, step outputs and event data against a
//! field map.

pub mod fields;
pub mod hash;
pub mod issue;
pub mod locate;
pub mod model;
pub mod names;
pub mod parse;
pub mod validate;
pub mod values;

pub use fields::{FieldMap, FieldSpec, FieldType, field_map_as_written, sample_values};
pub use hash::{ContentHash, content_hash};
pub use issue::Issue;
pub use model::*;
pub use parse::{Document, parse_document};
pub use validate::{Offer, validate, warnings};
pub use values::{PersonFormat, check_values};

/// A parsed, valid process with what it was made from.
#[derive(Debug, Clone)]
pub struct LoadedProcess {
    pub process: Process,
    /// The parsed frontmatter as JSON (numbers exactly as written).
    pub frontmatter: serde_json::Value,
    /// The body after the frontmatter, byte for byte.
    pub body: String,
    pub hash: ContentHash,
}

/// Parses, validates and hashes one `PROCESS.md`. Refusals carry every issue found.
pub fn load(bytes: &[u8], offer: &Offer) -> Result<LoadedProcess, Vec<Issue>> {
    let document = parse_document(bytes)?;
    let process = validate(&document.frontmatter, offer)?;
    let hash = content_hash(&document.frontmatter, &document.body);
    Ok(LoadedProcess {
        process,
        frontmatter: document.frontmatter,
        body: document.body,
        hash,
    })
}
