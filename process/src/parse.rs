//! Splits a PROCESS.md into frontmatter and body and parses the frontmatter (YAML 1.2 core schema).
//!
//! The frontmatter is read with an event-based YAML parser and the JSON tree is built here, so
//! that every rule of spec §2.1 is ours to enforce: core schema only (`yes` stays a string),
//! numbers kept exactly as written, string keys only, no duplicate keys, core tags only, one
//! document. Hostile input is bounded: the document size, the nesting depth and the number of
//! values an alias may expand to all have limits, and every refusal is an [`Issue`].

use crate::issue::{self, Issue};
use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, Span, Tag};
use serde_json::{Map, Number, Value};
use std::collections::HashMap;

/// The largest document accepted, in bytes (1 MiB).
pub const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// The most values the frontmatter may hold, counting every value an alias expands to and every
/// anchored value kept for later aliases. Bounds time and memory against alias bombs.
pub const MAX_VALUES: usize = 100_000;

/// The most scalar text (strings, keys, numbers as written) the frontmatter may expand to, in
/// bytes, counted like [`MAX_VALUES`].
pub const MAX_EXPANDED_TEXT_BYTES: usize = 4 * 1024 * 1024;

/// The deepest nesting of lists and mappings accepted; the top-level mapping is level 1.
pub const MAX_DEPTH: usize = 64;

/// The file line on which the frontmatter's first line sits: line 1 is the opening `---`.
const FRONTMATTER_FIRST_LINE: usize = 2;

/// The handle every YAML core tag (`!!str`, `!!int`, ...) resolves to.
const CORE_TAG_PREFIX: &str = "tag:yaml.org,2002:";

/// A split, parsed document.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The frontmatter as JSON; numbers keep the text they were written with.
    pub frontmatter: Value,
    /// Everything after the closing `---` line, byte for byte.
    pub body: String,
}

/// Parses one document. Refusals carry a clear, located reason.
///
/// Line numbers in issues count lines of the whole file, the opening `---` being line 1.
pub fn parse_document(bytes: &[u8]) -> Result<Document, Vec<Issue>> {
    parse(bytes).map_err(|issue| vec![issue])
}

fn parse(bytes: &[u8]) -> Result<Document, Issue> {
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(Issue::new(
            "",
            format!(
                "the document is {} bytes; the limit is {MAX_DOCUMENT_BYTES} bytes (1 MiB)",
                bytes.len()
            ),
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|error| {
        Issue::new(
            "",
            format!(
                "the document is not valid UTF-8: invalid byte at offset {}",
                error.valid_up_to()
            ),
        )
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let parts = split(text)?;
    let frontmatter = parse_frontmatter(parts.frontmatter)?;
    Ok(Document {
        frontmatter,
        body: parts.body.to_string(),
    })
}

/// A document cut at its `---` lines.
#[derive(Debug)]
pub(crate) struct Parts<'a> {
    /// The lines between the opening and the closing `---` lines, with their line endings.
    pub(crate) frontmatter: &'a str,
    /// Everything after the closing line's line ending.
    body: &'a str,
}

/// Cuts the frontmatter and the body apart. `text` has no BOM.
pub(crate) fn split(text: &str) -> Result<Parts<'_>, Issue> {
    let (first, mut rest) = next_line(text);
    if !is_delimiter(first) {
        return Err(Issue::new(
            "",
            "the document must start with a `---` line opening the frontmatter",
        ));
    }
    let frontmatter_start = text.len() - rest.len();
    while !rest.is_empty() {
        let line_start = text.len() - rest.len();
        let (line, after) = next_line(rest);
        if is_delimiter(line) {
            return Ok(Parts {
                frontmatter: &text[frontmatter_start..line_start],
                body: after,
            });
        }
        rest = after;
    }
    Err(unterminated())
}

fn unterminated() -> Issue {
    Issue::new(
        "",
        "the frontmatter opened on line 1 is never closed: no `---` line follows it",
    )
}

/// Splits off one line: its content without the line ending, and what follows the line ending.
fn next_line(text: &str) -> (&str, &str) {
    match text.find('\n') {
        Some(end) => {
            let line = &text[..end];
            (line.strip_suffix('\r').unwrap_or(line), &text[end + 1..])
        }
        None => (text, ""),
    }
}

/// A `---` line, trailing spaces and tabs allowed.
fn is_delimiter(line: &str) -> bool {
    line.trim_end_matches([' ', '\t']) == "---"
}

/// Converts a line of the frontmatter (1-based) into a line of the file.
pub(crate) fn file_line(frontmatter_line: usize) -> usize {
    frontmatter_line + FRONTMATTER_FIRST_LINE - 1
}

fn line_of(span: &Span) -> usize {
    file_line(span.start.line())
}

/// Parses the frontmatter text into JSON; it must hold exactly one YAML document, a mapping.
fn parse_frontmatter(text: &str) -> Result<Value, Issue> {
    let mut builder = Builder::default();
    let mut documents = 0usize;
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(syntax_error)?;
        match event {
            Event::StreamStart | Event::Nothing | Event::DocumentEnd => {}
            Event::StreamEnd => break,
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(Issue::new(
                        "",
                        format!(
                            "the frontmatter must hold one YAML document; a second one starts on line {}",
                            line_of(&span)
                        ),
                    ));
                }
            }
            other => builder.on_event(other, &span)?,
        }
    }
    match builder.root {
        None => Err(Issue::new("", "the frontmatter between the `---` lines is empty")),
        Some(Value::Object(map)) => Ok(Value::Object(map)),
        Some(other) => Err(Issue::new(
            "",
            format!(
                "the frontmatter must be a YAML mapping of keys to values, not {}",
                kind_of(&other)
            ),
        )),
    }
}

fn syntax_error(error: ScanError) -> Issue {
    let marker = error.marker();
    // The scanner has its own, higher nesting limit, met ahead of ours inside flow collections.
    let reason = match error.info() {
        "recursion limit exceeded" => DEPTH_MESSAGE,
        other => other,
    };
    Issue::new(
        "",
        format!(
            "frontmatter line {} column {}: {reason}",
            file_line(marker.line()),
            marker.col() + 1,
        ),
    )
}

/// What a JSON value is, for messages: "a list", "null", ...
fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// A value kept under an anchor for later aliases, with what it costs to copy.
#[derive(Debug)]
struct Anchored {
    value: Value,
    cost: Cost,
    /// Levels of nesting inside the value: 0 for a scalar, 1 for a list of scalars.
    height: usize,
}

/// What part of the budgets a value uses.
#[derive(Debug, Clone, Copy, Default)]
struct Cost {
    values: usize,
    text_bytes: usize,
}

/// A list or mapping being built.
#[derive(Debug)]
struct Frame {
    node: Node,
    anchor: usize,
    /// The budget spent when this collection started, to know its own cost at its end.
    spent_before: Cost,
    /// Levels of nesting below this collection so far.
    height: usize,
}

#[derive(Debug)]
enum Node {
    List(Vec<Value>),
    /// A mapping; `key` holds a key read whose value has not come yet.
    Mapping {
        map: Map<String, Value>,
        key: Option<String>,
    },
}

/// Builds the JSON tree from parser events with an explicit stack (no recursion).
///
/// Paths for issues are worked out from the stack only when an issue is raised: building one
/// per node would copy long keys once per value below them.
#[derive(Debug, Default)]
struct Builder {
    stack: Vec<Frame>,
    anchors: HashMap<usize, Anchored>,
    spent: Cost,
    root: Option<Value>,
}

impl Builder {
    /// Whether the next node is the key of a mapping.
    fn expects_key(&self) -> bool {
        matches!(
            self.stack.last(),
            Some(Frame {
                node: Node::Mapping { key: None, .. },
                ..
            })
        )
    }

    /// The JSON path of the collection `depth` levels down the stack (0: the root).
    fn path_at(&self, depth: usize) -> String {
        let mut path = String::new();
        for frame in self.stack.iter().take(depth) {
            path = match &frame.node {
                Node::List(items) => issue::index(&path, items.len()),
                Node::Mapping { key: Some(key), .. } => issue::child(&path, key),
                Node::Mapping { key: None, .. } => path,
            };
        }
        path
    }

    /// The path an issue about the next node carries: the node's own path, or for a key the
    /// path of its mapping.
    fn next_path(&self) -> String {
        if self.expects_key() {
            self.path_at(self.stack.len() - 1)
        } else {
            self.path_at(self.stack.len())
        }
    }

    /// An issue about the next node; `message` ends with its line.
    fn refuse(&self, message: String, line: usize) -> Issue {
        Issue::new(self.next_path(), format!("{message} (line {line})"))
    }

    fn on_event(&mut self, event: Event<'_>, span: &Span) -> Result<(), Issue> {
        let line = line_of(span);
        if self.root.is_some() {
            // The parser allows one root node per document; guard anyway.
            return Err(Issue::new(
                "",
                format!("unexpected content after the frontmatter mapping (line {line})"),
            ));
        }
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let value = resolve_scalar(&text, style, tag.as_deref())
                    .map_err(|message| self.refuse(message, line))?;
                let cost = Cost {
                    values: 1,
                    text_bytes: text.len(),
                };
                self.spend(cost, line)?;
                if anchor != 0 {
                    self.keep_anchor(anchor, value.clone(), cost, 0, line)?;
                }
                self.place(value, 0, line)
            }
            Event::SequenceStart(anchor, tag) => {
                self.open(Node::List(Vec::new()), anchor, tag.as_deref(), line)
            }
            Event::MappingStart(anchor, tag) => self.open(
                Node::Mapping {
                    map: Map::new(),
                    key: None,
                },
                anchor,
                tag.as_deref(),
                line,
            ),
            Event::SequenceEnd | Event::MappingEnd => self.close(line),
            Event::Alias(anchor) => {
                let Some(anchored) = self.anchors.get(&anchor) else {
                    return Err(self.refuse("an alias refers to a node that contains it".to_string(), line));
                };
                let (cost, height) = (anchored.cost, anchored.height);
                // Spend before copying, so an alias bomb stops before it allocates.
                self.spend(cost, line)?;
                let value = self
                    .anchors
                    .get(&anchor)
                    .map(|anchored| anchored.value.clone())
                    .unwrap_or_default();
                self.place(value, height, line)
            }
            Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart(_)
            | Event::DocumentEnd
            | Event::Nothing => Ok(()),
        }
    }

    /// Starts a list or mapping after checking its tag and the depth limit.
    fn open(&mut self, node: Node, anchor: usize, tag: Option<&Tag>, line: usize) -> Result<(), Issue> {
        let (kind, expected_tag) = match node {
            Node::List(_) => ("list", "seq"),
            Node::Mapping { .. } => ("mapping", "map"),
        };
        if self.expects_key() {
            return Err(self.refuse(format!("a mapping key is a {kind}; keys must be strings"), line));
        }
        if let Some(tag) = tag {
            match core_tag(tag) {
                Some(name) if name == expected_tag => {}
                Some(name) if is_known_core_tag(name) => {
                    return Err(self.refuse(format!("the tag !!{name} cannot be put on a {kind}"), line));
                }
                _ => return Err(self.refuse(unsupported_tag(tag), line)),
            }
        }
        if self.stack.len() + 1 > MAX_DEPTH {
            return Err(self.refuse(DEPTH_MESSAGE.to_string(), line));
        }
        let spent_before = self.spent;
        self.spend(
            Cost {
                values: 1,
                text_bytes: 0,
            },
            line,
        )?;
        self.stack.push(Frame {
            node,
            anchor,
            spent_before,
            height: 0,
        });
        Ok(())
    }

    /// Ends the innermost list or mapping and places it in its parent.
    fn close(&mut self, line: usize) -> Result<(), Issue> {
        let Some(frame) = self.stack.pop() else {
            return Err(Issue::new(
                "",
                format!("the end of a list or mapping that never started (line {line})"),
            ));
        };
        let value = match frame.node {
            Node::List(items) => Value::Array(items),
            Node::Mapping { map, key: None } => Value::Object(map),
            Node::Mapping { key: Some(key), .. } => {
                // The parser always gives a key its value, if only an empty one.
                return Err(Issue::new(
                    self.path_at(self.stack.len()),
                    format!("key {key:?} has no value (line {line})"),
                ));
            }
        };
        let height = frame.height + 1;
        if frame.anchor != 0 {
            let cost = Cost {
                values: self.spent.values - frame.spent_before.values,
                text_bytes: self.spent.text_bytes - frame.spent_before.text_bytes,
            };
            self.keep_anchor(frame.anchor, value.clone(), cost, height, line)?;
        }
        self.place(value, height, line)
    }

    /// Keeps a copy of an anchored value; the copy counts against the budgets.
    fn keep_anchor(
        &mut self,
        anchor: usize,
        value: Value,
        cost: Cost,
        height: usize,
        line: usize,
    ) -> Result<(), Issue> {
        self.spend(cost, line)?;
        self.anchors.insert(anchor, Anchored { value, cost, height });
        Ok(())
    }

    /// Counts values and text against the budgets, refusing once one is exceeded.
    fn spend(&mut self, cost: Cost, line: usize) -> Result<(), Issue> {
        self.spent.values = self.spent.values.saturating_add(cost.values);
        self.spent.text_bytes = self.spent.text_bytes.saturating_add(cost.text_bytes);
        if self.spent.values > MAX_VALUES {
            return Err(Issue::new(
                "",
                format!(
                    "the frontmatter holds more than {MAX_VALUES} values once anchors and aliases are expanded (line {line})"
                ),
            ));
        }
        if self.spent.text_bytes > MAX_EXPANDED_TEXT_BYTES {
            return Err(Issue::new(
                "",
                format!(
                    "the frontmatter holds more than {MAX_EXPANDED_TEXT_BYTES} bytes of text once anchors and aliases are expanded (line {line})"
                ),
            ));
        }
        Ok(())
    }

    /// Puts a finished value where the next node goes: a key, a mapping value, a list item or
    /// the root. `height` is its levels of nesting, for the depth limit.
    fn place(&mut self, value: Value, height: usize, line: usize) -> Result<(), Issue> {
        if self.stack.len() + height > MAX_DEPTH {
            return Err(self.refuse(DEPTH_MESSAGE.to_string(), line));
        }
        let mapping_depth = self.stack.len().saturating_sub(1);
        let Some(frame) = self.stack.last_mut() else {
            self.root = Some(value);
            return Ok(());
        };
        frame.height = frame.height.max(height);
        let Node::Mapping { map, key } = &mut frame.node else {
            if let Node::List(items) = &mut frame.node {
                items.push(value);
            }
            return Ok(());
        };
        if let Some(key) = key.take() {
            map.insert(key, value);
            return Ok(());
        }
        let name = match value {
            Value::String(name) => name,
            other => {
                return Err(Issue::new(
                    self.path_at(mapping_depth),
                    non_string_key(&other, line),
                ));
            }
        };
        if map.contains_key(&name) {
            return Err(Issue::new(
                self.path_at(mapping_depth),
                format!("duplicate key {name:?} (line {line})"),
            ));
        }
        *key = Some(name);
        Ok(())
    }
}

/// The depth refusal; it names [`MAX_DEPTH`].
const DEPTH_MESSAGE: &str = "the frontmatter nests lists and mappings more than 64 levels deep";

const _: () = assert!(MAX_DEPTH == 64, "DEPTH_MESSAGE names the limit");

/// Why a non-string value cannot be a mapping key, and how to fix it.
fn non_string_key(key: &Value, line: usize) -> String {
    let quote_it = |text: String, kind: &str| {
        format!("mapping key {text} is {kind}; keys must be strings, so quote it: \"{text}\" (line {line})")
    };
    match key {
        Value::Null => format!("a mapping key is empty or null; keys must be strings (line {line})"),
        Value::Bool(b) => quote_it(b.to_string(), "a boolean"),
        Value::Number(n) => quote_it(n.to_string(), "a number"),
        Value::String(_) | Value::Array(_) | Value::Object(_) => format!(
            "a mapping key is {}; keys must be strings (line {line})",
            kind_of(key)
        ),
    }
}

/// The name of a core tag (`str` for `!!str`), or `None` for any other tag.
fn core_tag(tag: &Tag) -> Option<&str> {
    if tag.handle == CORE_TAG_PREFIX {
        Some(tag.suffix.as_str())
    } else if tag.handle.is_empty() {
        // A verbatim tag: `!<tag:yaml.org,2002:str>`.
        tag.suffix.strip_prefix(CORE_TAG_PREFIX)
    } else {
        None
    }
}

fn is_known_core_tag(name: &str) -> bool {
    matches!(name, "str" | "int" | "float" | "bool" | "null" | "map" | "seq")
}

/// A tag as its author wrote it, near enough: `!!binary`, `!local`, `!<verbatim>`.
fn tag_name(tag: &Tag) -> String {
    if let Some(core) = core_tag(tag) {
        format!("!!{core}")
    } else if tag.handle == "!" {
        format!("!{}", tag.suffix)
    } else if tag.handle.is_empty() && tag.suffix == "!" {
        "!".to_string()
    } else {
        format!("!<{}{}>", tag.handle, tag.suffix)
    }
}

/// The refusal of a tag outside the core schema, without its line.
fn unsupported_tag(tag: &Tag) -> String {
    format!(
        "the tag {} is not allowed; only the core tags !!str, !!int, !!float, !!bool, !!null, !!map and !!seq are",
        tag_name(tag)
    )
}

/// Resolves one scalar by the YAML 1.2 core schema, honouring an explicit core tag. A refusal
/// is the message alone; the caller adds where.
fn resolve_scalar(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<Value, String> {
    let Some(tag) = tag else {
        if style != ScalarStyle::Plain {
            return Ok(Value::String(text.to_string()));
        }
        return match plain(text) {
            Plain::Null => Ok(Value::Null),
            Plain::Bool(b) => Ok(Value::Bool(b)),
            Plain::Number(number) => number_value(text, number),
            Plain::NotFinite => Err(not_finite(text)),
            Plain::String => Ok(Value::String(text.to_string())),
        };
    };
    let name = match core_tag(tag) {
        Some(name) if is_known_core_tag(name) => name,
        _ => return Err(unsupported_tag(tag)),
    };
    match (name, plain(text)) {
        ("str", _) => Ok(Value::String(text.to_string())),
        ("null", Plain::Null) => Ok(Value::Null),
        ("bool", Plain::Bool(b)) => Ok(Value::Bool(b)),
        ("int", Plain::Number(number)) if !number.is_float() => number_value(text, number),
        ("float", Plain::Number(number)) if !number.is_radix() => number_value(text, number),
        ("float", Plain::NotFinite) => Err(not_finite(text)),
        ("map" | "seq", _) => Err(format!("the tag !!{name} cannot be put on a scalar")),
        _ => Err(format!("{text:?} is not a valid !!{name}")),
    }
}

fn not_finite(text: &str) -> String {
    format!("{text} is not a finite number; JSON has no such value")
}

/// How a plain scalar resolves under the core schema.
enum Plain {
    Null,
    Bool(bool),
    Number(JsonNumber),
    /// `.inf`, `-.inf`, `.nan` and their case variants.
    NotFinite,
    String,
}

/// A number as JSON text, or why it cannot be one.
enum JsonNumber {
    /// A decimal integer, normalized to JSON syntax without changing its value.
    Integer(String),
    /// A decimal float, normalized the same way.
    Float(String),
    /// From `0x` or `0o` notation.
    Radix(Result<String, String>),
}

impl JsonNumber {
    fn is_radix(&self) -> bool {
        matches!(self, JsonNumber::Radix(_))
    }

    fn is_float(&self) -> bool {
        matches!(self, JsonNumber::Float(_))
    }
}

/// Builds the JSON number, refusing one that does not fit a double (RFC 8785 needs one).
fn number_value(text: &str, number: JsonNumber) -> Result<Value, String> {
    let json = match number {
        JsonNumber::Integer(json) | JsonNumber::Float(json) => json,
        JsonNumber::Radix(json) => json?,
    };
    match json.parse::<f64>() {
        Ok(double) if double.is_finite() => {}
        _ => {
            return Err(format!(
                "{text} is out of range: a number must fit in a 64-bit floating point value"
            ));
        }
    }
    serde_json::from_str::<Number>(&json)
        .map(Value::Number)
        .map_err(|_| format!("{text} cannot be written as a JSON number"))
}

/// Resolves a plain scalar by the tag resolution of the YAML 1.2 core schema (§10.3.2).
fn plain(text: &str) -> Plain {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Plain::Null,
        "true" | "True" | "TRUE" => return Plain::Bool(true),
        "false" | "False" | "FALSE" => return Plain::Bool(false),
        ".nan" | ".NaN" | ".NAN" => return Plain::NotFinite,
        _ => {}
    }
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if matches!(unsigned, ".inf" | ".Inf" | ".INF") {
        return Plain::NotFinite;
    }
    if is_digits(unsigned, 10) {
        let digits = unsigned.trim_start_matches('0');
        let digits = if digits.is_empty() { "0" } else { digits };
        let sign = if negative { "-" } else { "" };
        return Plain::Number(JsonNumber::Integer(format!("{sign}{digits}")));
    }
    if let Some(octal) = text.strip_prefix("0o").filter(|d| is_digits(d, 8)) {
        return Plain::Number(JsonNumber::Radix(radix_to_decimal(text, octal, 8)));
    }
    if let Some(hex) = text.strip_prefix("0x").filter(|d| is_digits(d, 16)) {
        return Plain::Number(JsonNumber::Radix(radix_to_decimal(text, hex, 16)));
    }
    match decimal_float(negative, unsigned) {
        Some(json) => Plain::Number(JsonNumber::Float(json)),
        None => Plain::String,
    }
}

/// One or more digits of the radix, nothing else.
fn is_digits(text: &str, radix: u32) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_digit(radix))
}

fn radix_to_decimal(text: &str, digits: &str, radix: u32) -> Result<String, String> {
    u128::from_str_radix(digits, radix)
        .map(|value| value.to_string())
        .map_err(|_| format!("{text} is too large: hexadecimal and octal numbers must fit in 128 bits"))
}

/// Matches `(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?` (the sign is already off) and
/// rewrites it as a JSON number of the same value: `1.` → `1.0`, `.5` → `0.5`, `007.5` → `7.5`.
fn decimal_float(negative: bool, unsigned: &str) -> Option<String> {
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], Some(&unsigned[at + 1..])),
        None => (unsigned, None),
    };
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (mantissa, None),
    };
    let whole_ok = whole.is_empty() || is_digits(whole, 10);
    let fraction_ok = match fraction {
        None => !whole.is_empty(),
        Some("") => !whole.is_empty(),
        Some(fraction) => is_digits(fraction, 10),
    };
    if !whole_ok || !fraction_ok || (whole.is_empty() && fraction.is_none()) {
        return None;
    }
    let exponent_digits = match exponent {
        None => None,
        Some(exponent) => {
            let digits = exponent.strip_prefix(['-', '+']).unwrap_or(exponent);
            if !is_digits(digits, 10) {
                return None;
            }
            Some(exponent)
        }
    };
    let mut json = String::with_capacity(unsigned.len() + 3);
    if negative {
        json.push('-');
    }
    let whole = whole.trim_start_matches('0');
    json.push_str(if whole.is_empty() { "0" } else { whole });
    match fraction {
        Some("") => json.push_str(".0"),
        Some(fraction) => {
            json.push('.');
            json.push_str(fraction);
        }
        None => {}
    }
    if let Some(exponent) = exponent_digits {
        json.push('e');
        json.push_str(exponent);
    }
    Some(json)
}
