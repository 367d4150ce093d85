//! Field maps (`inputs`, `output`, event data): the eight field types and their declarations.

use indexmap::IndexMap;
use serde_json::{Map, Value, json};
use std::fmt;

/// The eight field types of spec §2.3. That is the whole schema language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldType {
    String,
    Number,
    Boolean,
    /// `YYYY-MM-DD`, a real calendar date.
    Date,
    /// RFC 3339 with an offset.
    Datetime,
    List,
    Object,
    /// An identity reference in the server's person format (shown in `describe`).
    Person,
}

impl FieldType {
    pub const ALL: [FieldType; 8] = [
        FieldType::String,
        FieldType::Number,
        FieldType::Boolean,
        FieldType::Date,
        FieldType::Datetime,
        FieldType::List,
        FieldType::Object,
        FieldType::Person,
    ];

    /// The type's name as written in a `PROCESS.md`.
    pub fn name(self) -> &'static str {
        match self {
            FieldType::String => "string",
            FieldType::Number => "number",
            FieldType::Boolean => "boolean",
            FieldType::Date => "date",
            FieldType::Datetime => "datetime",
            FieldType::List => "list",
            FieldType::Object => "object",
            FieldType::Person => "person",
        }
    }

    /// Parses a type name; `None` for anything but the eight names, compared exactly.
    pub fn from_name(name: &str) -> Option<FieldType> {
        FieldType::ALL.into_iter().find(|t| t.name() == name)
    }
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One declared field: a type plus the optional `description`, `optional`, `one_of` and `items`.
///
/// INVARIANT (established by validation): every `one_of` value has type `field_type`, and
/// `items` is present only when `field_type` is `List`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldSpec {
    pub field_type: FieldType,
    pub description: Option<String>,
    pub optional: bool,
    /// Allowed values, kept exactly as written (numbers unrounded).
    pub one_of: Option<Vec<Value>>,
    /// The element declaration of a `list`; `None` allows elements of any type.
    pub items: Option<Box<FieldSpec>>,
}

impl FieldSpec {
    /// A bare declaration such as `amount: number`.
    pub fn of_type(field_type: FieldType) -> Self {
        FieldSpec {
            field_type,
            description: None,
            optional: false,
            one_of: None,
            items: None,
        }
    }

    /// A value this declaration accepts, for filling in generated runs: its first `one_of`
    /// option, else a plain value of its type, with `person` and `datetime` as the caller needs
    /// them (a `datetime` in the past makes a `wait_until` on it continue at once).
    pub fn sample(&self, person: &str, datetime: &str) -> Value {
        if let Some(first) = self.one_of.as_ref().and_then(|values| values.first()) {
            return first.clone();
        }
        match self.field_type {
            FieldType::String => Value::from("fixture"),
            FieldType::Number => Value::from(1),
            FieldType::Boolean => Value::Bool(true),
            FieldType::Date => Value::from("2030-01-01"),
            FieldType::Datetime => Value::from(datetime),
            FieldType::List => Value::Array(Vec::new()),
            FieldType::Object => Value::Object(Map::new()),
            FieldType::Person => Value::from(person),
        }
    }
}

/// Field name to declaration, in the order the document declares them.
pub type FieldMap = IndexMap<String, FieldSpec>;

/// A sample value of every field of `fields` ([`FieldSpec::sample`]), optional ones too.
pub fn sample_values(fields: &FieldMap, person: &str, datetime: &str) -> Map<String, Value> {
    fields
        .iter()
        .map(|(name, spec)| (name.clone(), spec.sample(person, datetime)))
        .collect()
}

/// A field map as written: a bare type name, or an object when more than the type is declared.
pub fn field_map_as_written(fields: &FieldMap) -> Value {
    Value::Object(
        fields
            .iter()
            .map(|(name, spec)| (name.clone(), field_spec(spec)))
            .collect(),
    )
}

fn field_spec(spec: &FieldSpec) -> Value {
    if spec.description.is_none() && !spec.optional && spec.one_of.is_none() && spec.items.is_none() {
        return json!(spec.field_type.name());
    }
    let mut out = Map::new();
    out.insert("type".into(), json!(spec.field_type.name()));
    if let Some(description) = &spec.description {
        out.insert("description".into(), json!(description));
    }
    if spec.optional {
        out.insert("optional".into(), json!(true));
    }
    if let Some(one_of) = &spec.one_of {
        out.insert("one_of".into(), Value::Array(one_of.clone()));
    }
    if let Some(items) = &spec.items {
        out.insert("items".into(), field_spec(items));
    }
    Value::Object(out)
}
