//! A work item's output fields as a form shows them, and the typed `output` built back from what
//! a person typed: one input per declared field, read by its declared type (spec §3.4 fields).

use agentprocess_process::{FieldSpec, FieldType};
use serde_json::{Map, Number, Value};

/// What a posted form holds, in the order sent: names may repeat (files already uploaded, a list
/// typed as repeated inputs).
#[derive(Debug, Clone, Default)]
pub struct FormValues(pub Vec<(String, String)>);

impl FormValues {
    /// The first value sent for `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// Every value sent for `name`.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The value of `name`, trimmed; `None` when it was not sent or is blank.
    pub fn filled(&self, name: &str) -> Option<&str> {
        self.get(name).map(str::trim).filter(|value| !value.is_empty())
    }
}

/// One output field of a work item: its name and declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputField {
    pub name: String,
    pub spec: FieldSpec,
}

impl OutputField {
    /// The form input's name: `output.<field>`, as the protocol's issues name it.
    pub fn input_name(&self) -> String {
        format!("output.{}", self.name)
    }
}

/// The output fields of a work item's `output` (a map of bare type names or declarations), in
/// the order declared; fields whose declaration is not understood are left out.
pub fn output_fields(output: &Value) -> Vec<OutputField> {
    let Some(map) = output.as_object() else {
        return Vec::new();
    };
    map.iter()
        .filter_map(|(name, declaration)| {
            field_spec(declaration).map(|spec| OutputField {
                name: name.clone(),
                spec,
            })
        })
        .collect()
}

/// A declaration as `claim.step.output` renders it: `"number"` or `{ type, description?,
/// optional?, one_of?, items? }`.
fn field_spec(declaration: &Value) -> Option<FieldSpec> {
    if let Some(name) = declaration.as_str() {
        return FieldType::from_name(name).map(FieldSpec::of_type);
    }
    let object = declaration.as_object()?;
    let mut spec = FieldSpec::of_type(FieldType::from_name(object.get("type")?.as_str()?)?);
    spec.description = object
        .get("description")
        .and_then(Value::as_str)
        .map(str::to_owned);
    spec.optional = object.get("optional").and_then(Value::as_bool).unwrap_or(false);
    spec.one_of = object.get("one_of").and_then(Value::as_array).cloned();
    spec.items = object.get("items").and_then(field_spec).map(Box::new);
    Some(spec)
}

/// How the person is asked for a field's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// One radio button per allowed value (`one_of`), the value's index as the input's value.
    Choice,
    /// Yes or no radio buttons.
    YesNo,
    /// One value per line, in a text area.
    Lines,
    /// JSON, in a text area.
    Json,
    /// One text input of this HTML type.
    Text(&'static str),
}

/// The input that asks for a value of `spec`.
pub fn input_kind(spec: &FieldSpec) -> InputKind {
    if spec.one_of.is_some() {
        return InputKind::Choice;
    }
    match spec.field_type {
        FieldType::Boolean => InputKind::YesNo,
        FieldType::List => InputKind::Lines,
        FieldType::Object => InputKind::Json,
        FieldType::Number => InputKind::Text("number"),
        FieldType::Date => InputKind::Text("date"),
        FieldType::Person => InputKind::Text("email"),
        FieldType::String | FieldType::Datetime => InputKind::Text("text"),
    }
}

/// A problem with what was typed into one field: the field's input name and the message.
pub type FieldProblem = (String, String);

/// The `output` object built from `values`: each filled field read as its declared type; blank
/// fields left out (the server says which are required). Every field that cannot be read gets
/// its own problem.
pub fn read_output(
    fields: &[OutputField],
    values: &FormValues,
) -> Result<Map<String, Value>, Vec<FieldProblem>> {
    let mut output = Map::new();
    let mut problems = Vec::new();
    for field in fields {
        let input = field.input_name();
        let Some(text) = values.filled(&input) else {
            continue;
        };
        match read_value(&field.spec, text) {
            Ok(value) => {
                output.insert(field.name.clone(), value);
            }
            Err(message) => problems.push((input, message)),
        }
    }
    if problems.is_empty() {
        Ok(output)
    } else {
        Err(problems)
    }
}

/// `text` read as a value of `spec`; the error says what to type instead.
fn read_value(spec: &FieldSpec, text: &str) -> Result<Value, String> {
    if let Some(allowed) = &spec.one_of {
        return text
            .parse::<usize>()
            .ok()
            .and_then(|index| allowed.get(index))
            .cloned()
            .ok_or_else(|| "Choose one of the values shown.".to_owned());
    }
    match spec.field_type {
        FieldType::Number => read_number(text),
        FieldType::Boolean => match text {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err("Choose yes or no.".to_owned()),
        },
        FieldType::Object => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(object)) => Ok(Value::Object(object)),
            _ => Err("Enter a JSON object, like {\"name\": \"value\"}.".to_owned()),
        },
        FieldType::List => read_list(spec.items.as_deref(), text),
        FieldType::String | FieldType::Date | FieldType::Datetime | FieldType::Person => {
            Ok(Value::String(text.to_owned()))
        }
    }
}

/// A number as typed: an integer stays an integer.
fn read_number(text: &str) -> Result<Value, String> {
    if let Ok(integer) = text.parse::<i64>() {
        return Ok(Value::Number(integer.into()));
    }
    text.parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
        .map(Value::Number)
        .ok_or_else(|| format!("Enter a number, like 12 or 12.5 (not \"{text}\")."))
}

/// One list element per non-blank line, each read as the list's item type (text when the list
/// declares none).
fn read_list(items: Option<&FieldSpec>, text: &str) -> Result<Value, String> {
    let string_items = FieldSpec::of_type(FieldType::String);
    let item_spec = items.unwrap_or(&string_items);
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .enumerate()
        .map(|(index, line)| {
            read_value(item_spec, line).map_err(|message| format!("Line {}: {message}", index + 1))
        })
        .collect::<Result<Vec<Value>, String>>()
        .map(Value::Array)
}

/// A declared value as a person reads it: text as is, anything else as JSON.
pub fn value_label(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn values(pairs: &[(&str, &str)]) -> FormValues {
        FormValues(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn declarations_are_read_bare_or_in_full() {
        let fields = output_fields(&json!({
            "total": "number",
            "severity": { "type": "string", "one_of": ["low", "high"], "description": "How bad" },
            "ids": { "type": "list", "items": "number" },
            "note": { "type": "string", "optional": true },
            "odd": "no-such-type",
        }));
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["total", "severity", "ids", "note"]);
        assert_eq!(input_kind(&fields[0].spec), InputKind::Text("number"));
        assert_eq!(input_kind(&fields[1].spec), InputKind::Choice);
        assert_eq!(fields[1].spec.description.as_deref(), Some("How bad"));
        assert_eq!(
            fields[2].spec.items.as_deref().unwrap().field_type,
            FieldType::Number
        );
        assert!(fields[3].spec.optional);
    }

    #[test]
    fn typed_values_become_the_declared_types() {
        let fields = output_fields(&json!({
            "total": "number", "count": "number", "ok": "boolean", "severity": { "type": "string", "one_of": ["low", "high"] },
            "ids": { "type": "list", "items": "string" }, "extra": "object", "blank": "string",
        }));
        let output = read_output(
            &fields,
            &values(&[
                ("output.total", "12.5"),
                ("output.count", " 3 "),
                ("output.ok", "false"),
                ("output.severity", "1"),
                ("output.ids", "a\n\n b \n"),
                ("output.extra", "{\"k\": 1}"),
                ("output.blank", "   "),
            ]),
        )
        .unwrap();
        assert_eq!(
            Value::Object(output),
            json!({ "total": 12.5, "count": 3, "ok": false, "severity": "high", "ids": ["a", "b"], "extra": { "k": 1 } })
        );
    }

    #[test]
    fn every_unreadable_field_gets_its_own_problem() {
        let fields = output_fields(&json!({
            "total": "number", "ids": { "type": "list", "items": "number" }, "extra": "object",
            "severity": { "type": "string", "one_of": ["low"] },
        }));
        let problems = read_output(
            &fields,
            &values(&[
                ("output.total", "twelve"),
                ("output.ids", "1\nx"),
                ("output.extra", "[1]"),
                ("output.severity", "7"),
            ]),
        )
        .unwrap_err();
        let named: Vec<&str> = problems.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(
            named,
            ["output.total", "output.ids", "output.extra", "output.severity"]
        );
        assert!(problems[0].1.contains("twelve"));
        assert!(problems[1].1.starts_with("Line 2:"));
    }
}
