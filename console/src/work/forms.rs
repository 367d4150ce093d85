//! The forms of a work item page: only the decisions the item accepts (its `decide.decisions`),
//! each refusal next to the field it names, and what the person typed kept.

use super::fields::{FormValues, InputKind, OutputField, input_kind, output_fields, value_label};
use super::posted::FILE_INPUT;
use crate::session::CSRF_FIELD;
use crate::signing::random_text;
pub use agentprocess_service::Decision;
use maud::{Markup, html};
use serde_json::Value;

/// The button that sends `decision` on an item of `kind`.
fn button_label(decision: Decision, kind: &str) -> &'static str {
    match decision {
        Decision::Completed if kind == "task" => "Complete the task",
        Decision::Completed => "Complete the step",
        Decision::Approved => "Approve",
        Decision::Rejected => "Reject",
        Decision::Returned => "Return to the agent",
        Decision::Failed => "Fail the run",
    }
}

/// Problems to show on the forms: each next to its field (by input name), the rest on top.
#[derive(Debug, Clone, Default)]
pub struct Problems {
    pub by_field: Vec<(String, String)>,
    pub general: Vec<String>,
}

impl Problems {
    pub fn of(&self, field: &str) -> Option<&str> {
        self.by_field
            .iter()
            .find(|(name, _)| name == field)
            .map(|(_, message)| message.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.by_field.is_empty() && self.general.is_empty()
    }

    /// A problem for `field`: the first one per field is kept.
    pub fn add(&mut self, field: &str, message: String) {
        if self.of(field).is_none() {
            self.by_field.push((field.to_owned(), message));
        }
    }

    /// A refusal's `issues`, each next to the field it names (`output.total: expected number`)
    /// where the form has one.
    pub fn from_issues(issues: &[String], item: &Value) -> Problems {
        let fields: Vec<String> = output_fields(&item["output"])
            .iter()
            .map(OutputField::input_name)
            .collect();
        let mut problems = Problems::default();
        for issue in issues {
            match issue_field(issue, &fields) {
                Some(field) => problems.add(&field, issue.clone()),
                None => problems.general.push(issue.clone()),
            }
        }
        problems
    }
}

/// The form input an issue names: `output.<field>` when the form has it, `summary`, `evidence`,
/// `next`, `reason` or `note`.
fn issue_field(issue: &str, output_inputs: &[String]) -> Option<String> {
    let path = issue.split(':').next().unwrap_or_default().trim();
    let head = path.split(['.', '[', ' ', ',']).next().unwrap_or_default();
    match head {
        "output" => {
            let field = path
                .strip_prefix("output.")?
                .split(['.', '['])
                .next()
                .unwrap_or_default();
            let input = format!("output.{field}");
            output_inputs.contains(&input).then_some(input)
        }
        "summary" | "evidence" | "next" | "reason" | "note" => Some(head.to_owned()),
        _ => None,
    }
}

/// A file uploaded by an earlier try of the form, kept attached: `id` and the name it had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadedFile {
    pub id: String,
    pub file_name: String,
}

/// The name of the inputs that keep uploaded files attached.
pub const UPLOADED_INPUT: &str = "uploaded";

impl UploadedFile {
    /// As the form keeps it: `id name`.
    pub fn form_value(&self) -> String {
        format!("{} {}", self.id, self.file_name)
    }

    pub fn from_form_value(value: &str) -> Option<UploadedFile> {
        let (id, file_name) = value.split_once(' ')?;
        (!id.is_empty()).then(|| UploadedFile {
            id: id.to_owned(),
            file_name: file_name.to_owned(),
        })
    }
}

/// What the forms are drawn with: the item, what was typed before (if anything), the problems
/// found, and the session's CSRF token.
pub struct FormContext<'a> {
    pub item: &'a Value,
    pub values: &'a FormValues,
    pub problems: &'a Problems,
    /// Which form was sent (its problems and values belong to it).
    pub sent: Option<Decision>,
    pub csrf: &'a str,
    pub action: &'a str,
}

/// The forms for the decisions `item.decide.decisions` lists: completion (output, summary,
/// evidence, route) and the note-taking decisions.
pub fn decision_forms(context: &FormContext<'_>) -> Markup {
    let decisions: Vec<Decision> = context.item["decide"]["decisions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d.as_str().and_then(Decision::parse))
        .collect();
    let with_note: Vec<Decision> = decisions
        .iter()
        .copied()
        .filter(|d| *d != Decision::Completed)
        .collect();
    html! {
        @if !context.problems.is_empty() {
            div class="errors" role="alert" aria-labelledby="problems-heading" {
                h2 id="problems-heading" { "This could not be sent" }
                ul {
                    @for message in &context.problems.general { li { (message) } }
                    @for (field, message) in &context.problems.by_field {
                        li { a href={ "#" (input_id(field)) } { (message) } }
                    }
                }
            }
        }
        @if decisions.contains(&Decision::Completed) {
            (completion_form(context))
        }
        @if !with_note.is_empty() {
            (note_form(context, &with_note))
        }
    }
}

/// The hidden fields every form carries: CSRF token, item, snapshot, a fresh request id.
fn hidden_fields(context: &FormContext<'_>) -> Markup {
    let arguments = &context.item["decide"]["arguments"];
    html! {
        input type="hidden" name=(CSRF_FIELD) value=(context.csrf);
        input type="hidden" name="workItemId" value=(arguments["workItemId"].as_str().unwrap_or_default());
        input type="hidden" name="snapshot" value=(arguments["snapshot"].as_str().unwrap_or_default());
        input type="hidden" name="requestId" value=(random_text(16));
    }
}

/// The values typed in the form that was sent, none in the other.
fn typed<'a>(context: &'a FormContext<'_>, form: Decision) -> Option<&'a FormValues> {
    let sent = context.sent?;
    let same_form = (sent == Decision::Completed) == (form == Decision::Completed);
    same_form.then_some(context.values)
}

/// The completion form: one input per output field, the summary, evidence (links, files) and
/// the route with its reason when the step has routes.
fn completion_form(context: &FormContext<'_>) -> Markup {
    let item = context.item;
    let values = typed(context, Decision::Completed);
    let kind = item["kind"].as_str().unwrap_or_default();
    let fields = output_fields(&item["output"]);
    let evidence_kinds: Vec<&str> = item["evidence"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let routes = item["next"].as_array().filter(|routes| !routes.is_empty());
    let held = item["escalation"]["candidate"].is_object();
    let uploaded: Vec<UploadedFile> = values
        .map(|values| {
            values
                .all(UPLOADED_INPUT)
                .filter_map(UploadedFile::from_form_value)
                .collect()
        })
        .unwrap_or_default();
    let problems = context.problems;
    let evidence_error = problems.of("evidence");
    html! {
        form class="work-form" method="post" action=(context.action) enctype="multipart/form-data" novalidate {
            h2 { @if kind == "task" { "Complete this task" } @else { "Complete this step" } }
            @if held {
                p class="hint" { "Leave every field empty to accept the submission held for review as it is." }
            }
            (hidden_fields(context))
            @if !fields.is_empty() {
                fieldset {
                    legend { "Output" }
                    @for field in &fields { (output_input(field, values, problems)) }
                }
            }
            (textarea("summary", "Summary", "What you did and found, for whoever reads this run later (optional, up to 2000 characters).", values, problems, 4))
            fieldset id="f-evidence" aria-describedby=[evidence_error.map(|_| "f-evidence-error")] {
                legend { "Evidence" }
                @if !evidence_kinds.is_empty() {
                    p class="hint" { "This step needs evidence: " (evidence_kinds.join(" and ")) "." }
                }
                @if let Some(message) = evidence_error {
                    span class="error" id="f-evidence-error" { (message) }
                }
                div class="field" {
                    label for="f-evidence_links" { "Links" }
                    span class="hint" id="f-evidence_links-hint" { "Web addresses of the evidence, one per line." }
                    textarea id="f-evidence_links" name="evidence_links" rows="3"
                        aria-describedby=(evidence_described_by("f-evidence_links-hint", evidence_error))
                        aria-invalid=[evidence_error.map(|_| "true")] {
                        (values.and_then(|v| v.get("evidence_links")).unwrap_or_default())
                    }
                }
                @if !uploaded.is_empty() {
                    p { "Files uploaded already:" }
                    @for (index, file) in uploaded.iter().enumerate() {
                        div class="choice" {
                            input type="checkbox" id={ "f-uploaded-" (index) } name=(UPLOADED_INPUT) value=(file.form_value()) checked;
                            label for={ "f-uploaded-" (index) } { "Attach " (file.file_name) " (" (file.id) ")" }
                        }
                    }
                }
                div class="field" {
                    label for="f-evidence-files" { "Files" }
                    span class="hint" id="f-evidence-files-hint" { "Each file chosen is uploaded and attached as evidence." }
                    input type="file" id="f-evidence-files" name=(FILE_INPUT) multiple
                        aria-describedby=(evidence_described_by("f-evidence-files-hint", evidence_error))
                        aria-invalid=[evidence_error.map(|_| "true")];
                }
            }
            @if let Some(routes) = routes {
                (route_choice(routes, values, problems))
                (textarea("reason", "Reason", "Why this route (required with a route).", values, problems, 3))
            }
            div class="actions" {
                button type="submit" name="decision" value="completed" { (button_label(Decision::Completed, kind)) }
            }
        }
    }
}

/// The form of the decisions that take a note: approve, reject, return, fail.
fn note_form(context: &FormContext<'_>, decisions: &[Decision]) -> Markup {
    let kind = context.item["kind"].as_str().unwrap_or_default();
    let values = typed(context, Decision::Failed);
    let needs_note: Vec<&str> = decisions
        .iter()
        .filter(|d| **d != Decision::Approved)
        .map(|d| match d {
            Decision::Rejected => "reject",
            Decision::Returned => "return",
            _ => "fail the run",
        })
        .collect();
    let heading = if decisions.contains(&Decision::Approved) {
        "Decide"
    } else if decisions.contains(&Decision::Returned) {
        "Or hand it back"
    } else {
        "Or end the run"
    };
    let hint = format!(
        "Required to {}. Say what must change, or why.",
        needs_note.join(" or ")
    );
    html! {
        form class="work-form" method="post" action=(context.action) enctype="multipart/form-data" novalidate {
            h2 { (heading) }
            (hidden_fields(context))
            (textarea("note", "Note", &hint, values, context.problems, 4))
            div class="actions" {
                @for decision in decisions {
                    @let class = if *decision == Decision::Approved { "" } else { "secondary" };
                    button type="submit" class=(class) name="decision" value=(decision.as_str()) { (button_label(*decision, kind)) }
                }
            }
        }
    }
}

/// The id of a field's input, for labels and error links.
pub fn input_id(field: &str) -> String {
    let safe: String = field
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("f-{safe}")
}

/// The ids a field's input is described by: its hint and, when it has one, its error.
fn described_by(id: &str, error: Option<&str>) -> String {
    match error {
        Some(_) => format!("{id}-hint {id}-error"),
        None => format!("{id}-hint"),
    }
}

/// What an evidence input is described by: its hint, and the evidence's error when there is one.
fn evidence_described_by(hint_id: &str, error: Option<&str>) -> String {
    match error {
        Some(_) => format!("{hint_id} f-evidence-error"),
        None => hint_id.to_owned(),
    }
}

/// A labelled text area with its hint and error.
fn textarea(
    name: &str,
    label: &str,
    hint: &str,
    values: Option<&FormValues>,
    problems: &Problems,
    rows: u8,
) -> Markup {
    let id = input_id(name);
    let error = problems.of(name);
    html! {
        div class="field" {
            label for=(id) { (label) }
            span class="hint" id={ (id) "-hint" } { (hint) }
            @if let Some(message) = error { span class="error" id={ (id) "-error" } { (message) } }
            textarea id=(id) name=(name) rows=(rows) aria-describedby=(described_by(&id, error))
                aria-invalid=[error.map(|_| "true")] {
                (values.and_then(|v| v.get(name)).unwrap_or_default())
            }
        }
    }
}

/// The input for one output field, by its declared type.
fn output_input(field: &OutputField, values: Option<&FormValues>, problems: &Problems) -> Markup {
    let name = field.input_name();
    let id = input_id(&name);
    let error = problems.of(&name);
    let typed = values.and_then(|v| v.get(&name)).unwrap_or_default();
    let spec = &field.spec;
    let mut hint = spec.description.clone().unwrap_or_default();
    let type_hint = match input_kind(spec) {
        InputKind::Lines => "One value per line.",
        InputKind::Json => "A JSON object.",
        InputKind::Text("number") => "A number.",
        InputKind::Text("email") => "A person's email address.",
        _ if spec.field_type == agentprocess_process::FieldType::Datetime => {
            "A date and time, like 2026-10-06T09:00:00Z."
        }
        _ => "",
    };
    hint = [
        hint.as_str(),
        type_hint,
        if spec.optional { "Optional." } else { "" },
    ]
    .iter()
    .filter(|part| !part.is_empty())
    .copied()
    .collect::<Vec<_>>()
    .join(" ");
    html! {
        @match input_kind(spec) {
            InputKind::Choice | InputKind::YesNo => {
                @let options: Vec<(String, String)> = match &spec.one_of {
                    Some(allowed) => allowed.iter().enumerate().map(|(i, v)| (i.to_string(), value_label(v))).collect(),
                    None => vec![("true".into(), "Yes".into()), ("false".into(), "No".into())],
                };
                fieldset class="field-choices" aria-describedby=(described_by(&id, error)) {
                    legend { (field.name) @if spec.optional { " (optional)" } }
                    span class="hint" id={ (id) "-hint" } { (hint) }
                    @if let Some(message) = error { span class="error" id={ (id) "-error" } { (message) } }
                    @for (index, (value, label)) in options.iter().enumerate() {
                        @let option_id = if index == 0 { id.clone() } else { format!("{id}-{index}") };
                        div class="choice" {
                            input type="radio" id=(option_id) name=(name) value=(value) checked[typed == value]
                                aria-invalid=[error.map(|_| "true")];
                            label for=(option_id) { (label) }
                        }
                    }
                }
            }
            kind => {
                div class="field" {
                    label for=(id) { (field.name) @if spec.optional { " (optional)" } }
                    span class="hint" id={ (id) "-hint" } { (hint) }
                    @if let Some(message) = error { span class="error" id={ (id) "-error" } { (message) } }
                    @match kind {
                        InputKind::Lines | InputKind::Json => {
                            textarea id=(id) name=(name) rows="4" aria-describedby=(described_by(&id, error))
                                aria-invalid=[error.map(|_| "true")] { (typed) }
                        }
                        InputKind::Text(input_type) => {
                            input type=(input_type) id=(id) name=(name) value=(typed) step=[(input_type == "number").then_some("any")]
                                aria-describedby=(described_by(&id, error)) aria-invalid=[error.map(|_| "true")];
                        }
                        _ => {}
                    }
                }
            }
        }
    }
}

/// The route radio buttons, each with its `when` text.
fn route_choice(routes: &[Value], values: Option<&FormValues>, problems: &Problems) -> Markup {
    let id = input_id("next");
    let error = problems.of("next");
    let typed = values.and_then(|v| v.get("next")).unwrap_or_default();
    html! {
        fieldset class="field-choices" aria-describedby=(described_by(&id, error)) {
            legend { "Next step" }
            span class="hint" id={ (id) "-hint" } { "Where the run goes from here." }
            @if let Some(message) = error { span class="error" id={ (id) "-error" } { (message) } }
            @for (index, route) in routes.iter().enumerate() {
                @let to = route["to"].as_str().unwrap_or_default();
                @let option_id = if index == 0 { id.clone() } else { format!("{id}-{index}") };
                div class="choice" {
                    input type="radio" id=(option_id) name="next" value=(to) checked[typed == to]
                        aria-invalid=[error.map(|_| "true")];
                    label for=(option_id) {
                        strong { (to) }
                        @if let Some(when) = route["when"].as_str() { ": " (when) }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn issues_land_next_to_the_fields_they_name() {
        let item = json!({ "output": { "revision": "string", "summary": "string" } });
        let problems = Problems::from_issues(
            &[
                "output.revision: expected string".into(),
                "output.unknown: not declared".into(),
                "evidence: file required".into(),
                "next: required, one of a, b".into(),
                "note: missing".into(),
                "the run is busy".into(),
            ],
            &item,
        );
        assert_eq!(
            problems.of("output.revision"),
            Some("output.revision: expected string")
        );
        assert_eq!(problems.of("evidence"), Some("evidence: file required"));
        assert!(problems.of("next").is_some() && problems.of("note").is_some());
        assert_eq!(
            problems.general,
            ["output.unknown: not declared", "the run is busy"]
        );
    }

    #[test]
    fn uploaded_files_survive_the_form() {
        let file = UploadedFile {
            id: "f_1".into(),
            file_name: "contract v2.pdf".into(),
        };
        assert_eq!(UploadedFile::from_form_value(&file.form_value()), Some(file));
        assert_eq!(UploadedFile::from_form_value("no-space"), None);
    }
}
