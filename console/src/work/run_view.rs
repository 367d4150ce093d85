//! What a work item page shows of its run: the item's text and facts, the escalation and
//! handoff it carries, the run's inputs and earlier steps' records, and the process body.

use super::fields::value_label;
use crate::markdown::to_safe_html;
use crate::when::time;
use maud::{Markup, PreEscaped, html};
use serde_json::Value;

/// A step kind as a person names it.
pub fn kind_label(kind: &str, escalated: bool) -> &'static str {
    match (kind, escalated) {
        (_, true) => "Escalation",
        ("approve", _) => "Approval",
        ("task", _) => "Task",
        ("agent", _) => "Agent step",
        _ => "Step",
    }
}

/// Who an item is assigned to, in words.
pub fn assignment(assigned_to: &Value) -> String {
    if let Some(group) = assigned_to["group"].as_str() {
        format!("the group {group}")
    } else if let Some(person) = assigned_to["person"].as_str() {
        person.to_owned()
    } else {
        "nobody named".to_owned()
    }
}

/// The instructions, as written (line breaks kept by the stylesheet).
pub fn instructions(text: &str) -> Markup {
    html! {
        @if text.trim().is_empty() {
            p { "This step has no instructions of its own: the process description below says what to do." }
        } @else {
            p class="instructions" { (text) }
        }
    }
}

/// An escalation: who escalated, when, why, and (check profile) the verdict and the held
/// submission.
pub fn escalation(escalation: &Value) -> Markup {
    html! {
        section class="work-box escalation" aria-labelledby="escalation-heading" {
            h2 id="escalation-heading" { "Escalated" }
            p { "By " (text(&escalation["by"])) " at " (time_of(&escalation["at"])) ":" }
            blockquote { p class="instructions" { (text(&escalation["note"])) } }
            @if escalation["check"].is_object() {
                (check_verdict(&escalation["check"]))
            }
            @if let Some(candidate) = escalation["candidate"].as_object() {
                h3 { "The submission held for review" }
                (record(&Value::Object(candidate.clone())))
            }
        }
    }
}

/// What the previous attempt left: a return note, issues, a check's verdict, progress.
pub fn handoff(handoff: &Value) -> Markup {
    html! {
        section class="work-box handoff" aria-labelledby="handoff-heading" {
            h2 id="handoff-heading" { "Handed back" }
            @if let Some(returned) = handoff["returned"].as_object() {
                p { "Returned by " (text(&returned["by"])) " at " (time_of(&returned["at"])) ":" }
                blockquote { p class="instructions" { (text(&returned["note"])) } }
            }
            @if let Some(issues) = handoff["issues"].as_array() {
                p { "The last submission was not accepted:" }
                ul { @for issue in issues { li { (value_label(issue)) } } }
            }
            @if handoff["check"].is_object() {
                (check_verdict(&handoff["check"]))
            }
            @if let Some(progress) = handoff["progress"].as_str() {
                p { "Progress noted before: " (progress) }
            }
        }
    }
}

/// A check's verdict and its questions (check profile).
fn check_verdict(check: &Value) -> Markup {
    html! {
        div class="check" {
            p {
                "Check verdict: " strong { (text(&check["verdict"])) }
                @if check["advisory"] == Value::Bool(true) { " (advisory)" }
                @if let Some(model) = check["model"].as_str() { ", by " (model) }
            }
            @if let Some(questions) = check["questions"].as_array() {
                ul {
                    @for question in questions {
                        li {
                            (text(&question["ask"])) ": " strong { (text(&question["result"])) }
                            @if !question["answer"].is_null() { " (answer: " (value_label(&question["answer"])) ")" }
                        }
                    }
                }
            }
        }
    }
}

/// The run's inputs and every step's current record, in the process's order.
pub fn run_data(view: &Value) -> Markup {
    let inputs = view["data"]["inputs"].as_object();
    let steps = &view["data"]["steps"];
    html! {
        section aria-labelledby="run-data-heading" {
            h2 id="run-data-heading" { "Run data" }
            h3 { "Inputs" }
            @match inputs.filter(|inputs| !inputs.is_empty()) {
                Some(inputs) => {
                    dl class="facts" {
                        @for (name, value) in inputs { dt { (name) } dd { (value_markup(value)) } }
                    }
                }
                None => p { "This run has no inputs." }
            }
            @for step in view["steps"].as_array().into_iter().flatten() {
                @let id = step["id"].as_str().unwrap_or_default();
                @if let Some(entry) = steps[id].as_object().filter(|entry| entry.contains_key("by")) {
                    div class="step-record" {
                        h3 { (id) }
                        (record(&Value::Object(entry.clone())))
                        @if let Some(history) = entry.get("history").and_then(Value::as_array).filter(|h| !h.is_empty()) {
                            p class="hint" { (history.len()) " earlier record(s) of this step, replaced since." }
                        }
                    }
                }
            }
        }
    }
}

/// One step record: output, summary, evidence, route, decision and note, who and when.
pub fn record(entry: &Value) -> Markup {
    html! {
        dl class="facts" {
            @if let Some(output) = entry["output"].as_object() {
                @for (name, value) in output { dt { (name) } dd { (value_markup(value)) } }
            }
            @if let Some(summary) = entry["summary"].as_str() { dt { "Summary" } dd class="instructions" { (summary) } }
            @if let Some(evidence) = entry["evidence"].as_array().filter(|e| !e.is_empty()) {
                dt { "Evidence" }
                dd { ul class="evidence" { @for item in evidence { li { (evidence_item(item)) } } } }
            }
            @if let Some(next) = entry["next"].as_str() { dt { "Next" } dd { (next) } }
            @if let Some(reason) = entry["reason"].as_str() { dt { "Reason" } dd class="instructions" { (reason) } }
            @if let Some(decision) = entry["decision"].as_str() { dt { "Decision" } dd { strong { (decision) } } }
            @if let Some(note) = entry["note"].as_str() { dt { "Note" } dd class="instructions" { (note) } }
            @if let Some(by) = entry["by"].as_str() { dt { "By" } dd { (by) } }
            @if entry["at"].is_string() { dt { "At" } dd { (time_of(&entry["at"])) } }
        }
    }
}

/// An evidence item: a link to the web page, or to the uploaded file through its signed URL.
fn evidence_item(item: &Value) -> Markup {
    let reference = item["ref"].as_str().unwrap_or_default();
    html! {
        @match item["kind"].as_str() {
            Some("file") => {
                "File "
                @if let Some(url) = item["url"].as_str() {
                    a href=(url) { (reference) }
                } @else {
                    (reference)
                }
                @if let Some(sha256) = item["sha256"].as_str() {
                    " " span class="hint" { "sha256 " code { (sha256.get(..12).unwrap_or(sha256)) "…" } }
                }
            }
            _ => {
                "Link " (text_or_link(reference))
            }
        }
    }
}

/// Where a page may link for `text`: its URL when the whole text is one http or https address
/// (no other scheme, such as `javascript:`, ever becomes a link).
pub fn web_link(text: &str) -> Option<url::Url> {
    let lower = text.to_ascii_lowercase();
    let written_as_web_address = lower.starts_with("https://") || lower.starts_with("http://");
    if !written_as_web_address || text.chars().any(char::is_whitespace) {
        return None;
    }
    let url = url::Url::parse(text).ok()?;
    (matches!(url.scheme(), "http" | "https") && url.has_host()).then_some(url)
}

/// `text` as a link when it is a web address, else as text; escaped either way.
fn text_or_link(text: &str) -> Markup {
    html! {
        @match web_link(text) {
            Some(url) => a class="value-link" href=(url.as_str()) { (text) },
            None => (text),
        }
    }
}

/// A value of run data: text as is (a web address as a link), a list of texts as a list,
/// anything else as JSON.
fn value_markup(value: &Value) -> Markup {
    html! {
        @match value {
            Value::Array(items) if !items.is_empty() && items.iter().all(|item| !item.is_object() && !item.is_array()) => {
                ul class="values" { @for item in items { li { (text_or_link(&value_label(item))) } } }
            }
            Value::String(text) => span class="instructions" { (text_or_link(text)) },
            other => code { (other.to_string()) },
        }
    }
}

/// The process description, from its Markdown, raw HTML escaped.
pub fn process_body(body: &str) -> Markup {
    html! {
        section class="process-body" aria-labelledby="process-body-heading" {
            h2 id="process-body-heading" { "About this process" }
            (PreEscaped(to_safe_html(body)))
        }
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        other => value_label(other),
    }
}

fn time_of(value: &Value) -> Markup {
    html! { @if let Some(at) = value.as_str() { (time(at)) } }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_whole_http_or_https_address_is_a_link() {
        for link in ["https://docs.test/invoice/42", "http://erp.test/a?b=1&c=<2>"] {
            assert!(web_link(link).is_some(), "{link}");
        }
        for text in [
            "javascript:alert(1)",
            "data:text/html,<b>x</b>",
            "ftp://files.test/a",
            "see https://docs.test/a",
            "https://docs.test/a b",
            "https:nohost",
            "docs.test/a",
            "",
        ] {
            assert!(web_link(text).is_none(), "{text:?}");
        }
    }

    #[test]
    fn run_data_shows_web_addresses_as_escaped_links_and_other_text_as_text() {
        let html = value_markup(&json!("https://docs.test/inv?a=1&b=\"><script>")).into_string();
        assert_eq!(
            html,
            "<span class=\"instructions\"><a class=\"value-link\" \
             href=\"https://docs.test/inv?a=1&amp;b=%22%3E%3Cscript%3E\">\
             https://docs.test/inv?a=1&amp;b=&quot;&gt;&lt;script&gt;</a></span>"
        );
        let html = value_markup(&json!("javascript:alert(1)")).into_string();
        assert!(!html.contains("<a"), "{html}");
        let list = value_markup(&json!(["https://a.test/1", "plain"])).into_string();
        assert!(
            list.contains("<li><a class=\"value-link\" href=\"https://a.test/1\">"),
            "{list}"
        );
        assert!(list.contains("<li>plain</li>"), "{list}");
    }
}
