//! The work item page, `GET|POST /ui/work/{runId}/{stepId}`: the step's text, the run's data and
//! the process body, and the decisions the protocol allows the caller on this item, sent with
//! `decide` (files through `upload` first).

mod notice;
pub use notice::DecisionNotice;
mod fields;
mod forms;
mod posted;
mod run_view;

pub use forms::Decision;
pub use run_view::kind_label;

use super::UiState;
use super::layout::{Page, message_page};
use super::session::set_flash;
use super::signing::random_text;
use crate::layout::{path_segment, run_path};
use crate::signed_in::SignedIn;
use agentprocess_gateway::Identity;
use agentprocess_gateway::auth::IdentityKind;
use agentprocess_gateway::mcp::{ToolError, ToolName};
use agentprocess_service::ErrorCode;
use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use fields::{FormValues, output_fields, read_output};
use forms::{FormContext, Problems, UPLOADED_INPUT, UploadedFile, decision_forms};
use maud::{Markup, html};
use posted::read_posted;
use serde_json::{Value, json};
use std::sync::Arc;

/// The route of a work item page.
pub const WORK_PATH: &str = "/ui/work/{run_id}/{step_id}";
/// The most files one form may carry, for the body limit.
const MAX_FILES_PER_FORM: usize = 4;
/// Room for a form's fields besides its files.
const FORM_FIELDS_BYTES: usize = 1024 * 1024;
/// Where `get_work` pages are read until, looking for one item.
const MAX_WORK_PAGES: usize = 20;

/// The path of the page of the item on `step_id` of `run_id`.
pub fn work_path(run_id: &str, step_id: &str) -> String {
    format!("/ui/work/{}/{}", path_segment(run_id), path_segment(step_id))
}

/// The largest work item form taken: a few files of the largest size `upload` takes, and the
/// fields.
pub fn max_form_bytes(state: &UiState) -> usize {
    let max_upload = state.describe["maxUploadBytes"]
        .as_u64()
        .and_then(|bytes| usize::try_from(bytes).ok())
        .unwrap_or(10 * 1024 * 1024);
    max_upload
        .saturating_mul(MAX_FILES_PER_FORM)
        .saturating_add(FORM_FIELDS_BYTES)
}

/// Where the item is for the caller.
enum Standing {
    /// The caller's open item (a person's work item from the run view).
    Mine(Value),
    /// An agent's ready step the caller may claim.
    AgentStep,
    /// Open, but assigned to others.
    Others,
    /// Not open: decided, done, or not reached.
    NotOpen,
}

/// A notice above the item.
enum Banner {
    Changed,
    AlreadyDecided,
    RunEnded,
}

/// `GET /ui/work/{runId}/{stepId}`.
pub async fn page(
    State(state): State<Arc<UiState>>,
    signed_in: SignedIn,
    Path((run_id, step_id)): Path<(String, String)>,
) -> Response {
    let view = match read_run(&state, &signed_in, &run_id, &step_id).await {
        Ok(view) => view,
        Err(page) => return page,
    };
    let standing = match standing(&state, &signed_in.identity, &view, &step_id).await {
        Ok(standing) => standing,
        Err(error) => return tool_failure(&signed_in, &error),
    };
    render(&signed_in, &view, &step_id, &standing, &Attempt::fresh())
}

/// `POST /ui/work/{runId}/{stepId}`: the decision sent with one of the page's forms.
pub async fn post(
    State(state): State<Arc<UiState>>,
    signed_in: SignedIn,
    Path((run_id, step_id)): Path<(String, String)>,
    headers: HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Response {
    let form = match read_posted(&state, &headers, multipart).await {
        Ok(form) => form,
        Err(page) => return page,
    };
    let Some(decision) = form.values.get("decision").and_then(Decision::parse) else {
        return super::session::bad_form("The form did not say which decision to send.");
    };
    let view = match read_run(&state, &signed_in, &run_id, &step_id).await {
        Ok(view) => view,
        Err(page) => return page,
    };
    let standing = match standing(&state, &signed_in.identity, &view, &step_id).await {
        Ok(standing) => standing,
        Err(error) => return tool_failure(&signed_in, &error),
    };
    let Standing::Mine(item) = &standing else {
        let attempt = Attempt::sent(
            decision,
            form.values,
            Problems::default(),
            Some(Banner::AlreadyDecided),
        );
        return render(&signed_in, &view, &step_id, &standing, &attempt);
    };
    let mut values = form.values;
    let arguments = match decide_arguments(
        &state,
        &signed_in.identity,
        decision,
        item,
        &mut values,
        &form.files,
    )
    .await
    {
        Ok(arguments) => arguments,
        Err(problems) => {
            return render(
                &signed_in,
                &view,
                &step_id,
                &standing,
                &Attempt::sent(decision, values, problems, None),
            );
        }
    };
    match state.call(&signed_in.identity, ToolName::Decide, arguments).await {
        Ok(_) => done(&state, &headers, decision, &run_id, &step_id),
        Err(error) => {
            refused(
                &state, &signed_in, &run_id, &step_id, decision, values, item, &error,
            )
            .await
        }
    }
}

/// What a form sent and what came of it, for drawing the page again.
struct Attempt {
    decision: Option<Decision>,
    values: FormValues,
    problems: Problems,
    banner: Option<Banner>,
}

impl Attempt {
    fn fresh() -> Attempt {
        Attempt {
            decision: None,
            values: FormValues::default(),
            problems: Problems::default(),
            banner: None,
        }
    }

    fn sent(decision: Decision, values: FormValues, problems: Problems, banner: Option<Banner>) -> Attempt {
        Attempt {
            decision: Some(decision),
            values,
            problems,
            banner,
        }
    }
}

/// After a refusal: the page again, with the run as it is now. A changed run (`stale`) shows
/// its fresh state and the form as typed, to send again; an item decided meanwhile says so.
#[allow(clippy::too_many_arguments)]
async fn refused(
    state: &UiState,
    signed_in: &SignedIn,
    run_id: &str,
    step_id: &str,
    decision: Decision,
    values: FormValues,
    item: &Value,
    error: &ToolError,
) -> Response {
    let banner = match error.code {
        ErrorCode::Stale => Some(Banner::Changed),
        ErrorCode::Conflict if error.issues.iter().any(|i| i == "run_ended") => Some(Banner::RunEnded),
        ErrorCode::Conflict if error.issues.iter().any(|i| i == "already_decided") => {
            Some(Banner::AlreadyDecided)
        }
        ErrorCode::Retry => return tool_failure(signed_in, error),
        _ => None,
    };
    let problems = match banner {
        Some(_) => Problems::default(),
        None => {
            let mut problems = Problems::from_issues(&error.issues, item);
            if error.issues.is_empty() {
                problems.general.push(error.message.clone());
            }
            problems
        }
    };
    let view = match read_run(state, signed_in, run_id, step_id).await {
        Ok(view) => view,
        Err(page) => return page,
    };
    let standing = match standing(state, &signed_in.identity, &view, step_id).await {
        Ok(standing) => standing,
        Err(error) => return tool_failure(signed_in, &error),
    };
    render(
        signed_in,
        &view,
        step_id,
        &standing,
        &Attempt::sent(decision, values, problems, banner),
    )
}

/// The `decide` arguments from a form: for `completed` the typed output, summary, evidence
/// (links, files kept from before, files chosen now, uploaded here) and route; else the note.
/// Files are uploaded only when everything typed reads. Uploaded files are added to `values`, so
/// a form drawn again keeps them attached.
async fn decide_arguments(
    state: &UiState,
    identity: &Identity,
    decision: Decision,
    item: &Value,
    values: &mut FormValues,
    files: &[posted::PostedFile],
) -> Result<Value, Problems> {
    let request_id = values
        .filled("requestId")
        .map(str::to_owned)
        .unwrap_or_else(|| random_text(16));
    let mut arguments = json!({
        "runId": item["decide"]["arguments"]["runId"],
        "workItemId": values.get("workItemId").unwrap_or_default(),
        "snapshot": values.get("snapshot").unwrap_or_default(),
        "decision": decision.as_str(),
        "requestId": request_id,
    });
    if decision != Decision::Completed {
        if let Some(note) = values.filled("note") {
            arguments["note"] = json!(note);
        }
        return Ok(arguments);
    }
    let output = read_output(&output_fields(&item["output"]), values).map_err(|problems| {
        let mut shown = Problems::default();
        for (field, message) in problems {
            shown.add(&field, message);
        }
        shown
    })?;
    for file in upload_all(state, identity, &request_id, files).await? {
        values.0.push((UPLOADED_INPUT.to_owned(), file.form_value()));
    }
    let evidence = evidence_items(values);
    let holds_candidate = item["escalation"]["candidate"].is_object();
    let typed_nothing = output.is_empty() && evidence.is_empty() && values.filled("summary").is_none();
    if !(holds_candidate && typed_nothing) {
        arguments["output"] = Value::Object(output);
        if !evidence.is_empty() {
            arguments["evidence"] = Value::Array(evidence);
        }
    }
    for name in ["summary", "next", "reason"] {
        if let Some(text) = values.filled(name) {
            arguments[name] = json!(text);
        }
    }
    Ok(arguments)
}

/// Every file chosen, through `upload`; a refusal is shown next to the evidence.
async fn upload_all(
    state: &UiState,
    identity: &Identity,
    request_id: &str,
    files: &[posted::PostedFile],
) -> Result<Vec<UploadedFile>, Problems> {
    let mut uploaded = Vec::new();
    for (index, file) in files.iter().enumerate() {
        let arguments = json!({
            "fileName": file.file_name,
            "contentType": file.content_type,
            "contentBase64": STANDARD.encode(&file.bytes),
            "requestId": format!("{request_id}-file-{index}"),
        });
        match state.call(identity, ToolName::Upload, arguments).await {
            Ok(result) => uploaded.push(UploadedFile {
                id: result["id"].as_str().unwrap_or_default().to_owned(),
                file_name: file.file_name.clone(),
            }),
            Err(error) => {
                let mut problems = Problems::default();
                let detail = if error.issues.is_empty() {
                    error.message.clone()
                } else {
                    error.issues.join("; ")
                };
                problems.add(
                    "evidence",
                    format!("{} could not be uploaded: {detail}", file.file_name),
                );
                return Err(problems);
            }
        }
    }
    Ok(uploaded)
}

/// The evidence a completion form names: links one per line, then files uploaded.
fn evidence_items(values: &FormValues) -> Vec<Value> {
    let links = values
        .get("evidence_links")
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(|link| json!({ "kind": "link", "ref": link }));
    let files = values
        .all(UPLOADED_INPUT)
        .filter_map(UploadedFile::from_form_value)
        .map(|file| json!({ "kind": "file", "ref": file.id }));
    links.chain(files).collect()
}

/// The 303 to the inbox after a decision, with the flash that tells this session what it did.
fn done(state: &UiState, headers: &HeaderMap, decision: Decision, run_id: &str, step_id: &str) -> Response {
    let notice = DecisionNotice {
        decision,
        run_id: run_id.to_owned(),
        step_id: step_id.to_owned(),
    };
    let mut response = Redirect::to(super::session::HOME_PATH).into_response();
    response
        .headers_mut()
        .append(header::SET_COOKIE, set_flash(state, headers, &notice.to_bytes()));
    response
}

/// The run view of `run_id`, when it has the step `step_id`; else the page saying why not.
async fn read_run(
    state: &UiState,
    signed_in: &SignedIn,
    run_id: &str,
    step_id: &str,
) -> Result<Value, Response> {
    let view = match state
        .call(&signed_in.identity, ToolName::GetRun, json!({ "runId": run_id }))
        .await
    {
        Ok(view) => view,
        Err(error) if matches!(error.code, ErrorCode::NotFound | ErrorCode::Invalid) => {
            return Err(message_page(
                StatusCode::NOT_FOUND,
                "No such run",
                "There is no run with this id in your organization. Open your work from the inbox.",
                Some(signed_in),
            ));
        }
        Err(error) => return Err(tool_failure(signed_in, &error)),
    };
    let has_step = view["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|step| step["id"] == step_id);
    if !has_step {
        return Err(message_page(
            StatusCode::NOT_FOUND,
            "No such step",
            "This run's process has no step with this id. Open your work from the inbox.",
            Some(signed_in),
        ));
    }
    Ok(view)
}

/// The page for a tool call that failed for a reason of the server's, not the caller's.
fn tool_failure(signed_in: &SignedIn, error: &ToolError) -> Response {
    let status = match error.code {
        ErrorCode::Forbidden => StatusCode::FORBIDDEN,
        ErrorCode::Retry => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::BAD_REQUEST,
    };
    message_page(
        status,
        "This cannot be done right now",
        &format!(
            "The server answered: {} ({}). Try again in a moment.",
            error.message,
            error.code.as_str()
        ),
        Some(signed_in),
    )
}

/// Whether the step's item is the caller's: a person's open item is theirs when their
/// `get_work` lists it; an agent's ready step when theirs does.
async fn standing(
    state: &UiState,
    identity: &Identity,
    view: &Value,
    step_id: &str,
) -> Result<Standing, ToolError> {
    let run_id = view["run"]["id"].as_str().unwrap_or_default();
    let process = view["run"]["process"].as_str().unwrap_or_default();
    let open_item = view["workItems"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|item| item["stepId"] == step_id);
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_WORK_PAGES {
        let mut arguments = json!({ "limit": 100, "process": process });
        if let Some(cursor) = &cursor {
            arguments["cursor"] = json!(cursor);
        }
        let work = state.call(identity, ToolName::GetWork, arguments).await?;
        for entry in work["items"].as_array().into_iter().flatten() {
            if entry["runId"] != run_id {
                continue;
            }
            match (&identity.kind, open_item) {
                (IdentityKind::Agent { .. }, _) if entry["stepId"] == step_id => {
                    return Ok(Standing::AgentStep);
                }
                (IdentityKind::Person { .. }, Some(item)) if entry["workItem"]["id"] == item["id"] => {
                    return Ok(Standing::Mine(item.clone()));
                }
                _ => {}
            }
        }
        match work["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    let step_open = view["steps"].as_array().into_iter().flatten().any(|step| {
        step["id"] == step_id && matches!(step["state"].as_str(), Some("ready" | "claimed" | "waiting"))
    });
    Ok(if open_item.is_some() || step_open {
        Standing::Others
    } else {
        Standing::NotOpen
    })
}

/// The page of the item: refused when it is someone else's, else its text, forms or status,
/// and the run's data.
fn render(
    signed_in: &SignedIn,
    view: &Value,
    step_id: &str,
    standing: &Standing,
    attempt: &Attempt,
) -> Response {
    if let Standing::Others = standing {
        return message_page(
            StatusCode::FORBIDDEN,
            "This work item is not yours",
            "It is assigned to someone else, so it is not shown here. Your own work is in your inbox.",
            Some(signed_in),
        );
    }
    let step = view["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|step| step["id"] == step_id)
        .cloned()
        .unwrap_or(Value::Null);
    let item = match standing {
        Standing::Mine(item) => Some(item),
        _ => None,
    };
    let kind = item
        .and_then(|item| item["kind"].as_str())
        .or_else(|| step["kind"].as_str())
        .unwrap_or_default();
    let escalated = item.is_some_and(|item| item["escalation"].is_object());
    let title = format!("{}: {step_id}", kind_label(kind, escalated));
    let run_id = view["run"]["id"].as_str().unwrap_or_default();
    let action = work_path(run_id, step_id);
    let main = html! {
        h1 { (title) }
        (facts(view, &step, item))
        @match attempt.banner {
            Some(Banner::Changed) => div class="notice changed" role="alert" {
                strong { "This run changed since you opened it." }
                " The page shows it as it is now. What you typed is kept below: check it against the new state and send it again."
            },
            Some(Banner::AlreadyDecided) => div class="notice changed" role="alert" {
                strong { "This item was decided already." } " Your decision was not sent. The run as it is now is below."
            },
            Some(Banner::RunEnded) => div class="notice changed" role="alert" {
                strong { "This run has ended." } " Your decision was not sent."
            },
            None => {}
        }
        // What is decided on comes before the decision: the instructions, what the item
        // carries, and the run's data, then the forms.
        @if let Some(item) = item {
            section aria-labelledby="what-heading" {
                h2 id="what-heading" { "What to do" }
                (run_view::instructions(item["text"].as_str().unwrap_or_default()))
            }
            @if item["escalation"].is_object() { (run_view::escalation(&item["escalation"])) }
            @if item["handoff"].is_object() { (run_view::handoff(&item["handoff"])) }
            (run_view::run_data(view))
            (decision_forms(&FormContext {
                item,
                values: &attempt.values,
                problems: &attempt.problems,
                sent: attempt.decision,
                csrf: signed_in.csrf(),
                action: &action,
            }))
        } @else {
            (status_of(view, &step, standing))
            (run_view::run_data(view))
        }
        (run_view::process_body(view["body"].as_str().unwrap_or_default()))
        p { a href="/ui" { "Back to your inbox" } }
    };
    Page {
        title: &title,
        signed_in: Some(signed_in),
        main,
    }
    .render(StatusCode::OK)
}

/// The facts of the item: process, run, assignment, due and whether it is a test run.
fn facts(view: &Value, step: &Value, item: Option<&Value>) -> Markup {
    let run = &view["run"];
    let due = item
        .and_then(|item| item["due"].as_str())
        .or_else(|| step["due"].as_str());
    let overdue = step["overdue"] == Value::Bool(true)
        || due.is_some_and(|due| super::when::is_before(due, super::when::now()));
    html! {
        dl class="facts" {
            dt { "Process" } dd { (run["process"].as_str().unwrap_or_default()) " (version " (run["version"]) ")" }
            dt { "Run" } dd { a href=(run_path(run["id"].as_str().unwrap_or_default())) { code { (run["id"].as_str().unwrap_or_default()) } } }
            @if run["mode"] == "test" { dt { "Mode" } dd { span class="badge test" { "Test run" } } }
            @if let Some(item) = item {
                dt { "Assigned to" } dd { (run_view::assignment(&item["assignedTo"])) }
            }
            @if let Some(due) = due {
                dt { "Due" }
                dd {
                    (super::when::time(due))
                    @if overdue { " " span class="badge overdue" { "Overdue" } }
                }
            }
        }
    }
}

/// What the page says instead of forms: an agent's step, or an item no longer open (who
/// decided and when, from the run data).
fn status_of(view: &Value, step: &Value, standing: &Standing) -> Markup {
    let step_id = step["id"].as_str().unwrap_or_default();
    let record = &view["data"]["steps"][step_id];
    html! {
        section aria-labelledby="status-heading" {
            h2 id="status-heading" { "Status" }
            @match standing {
                Standing::AgentStep => p {
                    "This step is ready for you. Agents claim and submit it with the claim and submit tools, "
                    "which hand out its instructions and output fields."
                },
                _ => {
                    @if record["by"].is_string() {
                        p {
                            "This item is no longer open: "
                            @if let Some(decision) = record["decision"].as_str() { strong { (decision) } } @else { "completed" }
                            " by " (record["by"].as_str().unwrap_or_default()) " at "
                            (super::when::time(record["at"].as_str().unwrap_or_default())) "."
                        }
                    } @else if let Some(ended) = view["run"]["ended"].as_object() {
                        p { "This run has ended (by " (ended.get("by").and_then(Value::as_str).unwrap_or_default()) ")." }
                    } @else {
                        p { "This step is not open now (" (step["state"].as_str().unwrap_or("not reached")) ")." }
                    }
                }
            }
        }
    }
}
