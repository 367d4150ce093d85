//! `GET /ui/trust?process=NAME` (operators): the trust report of `GET /admin/v1/trust`
//! (check-1 §4 "earn trust first") as a page: per version and checked step, how often the
//! approver agreed with the check's verdict, per day, and each disagreement with its run.

use super::{operators_only, refusal_page, time};
use crate::layout::path_segment;
use crate::layout::{Page, message_page};
use crate::session::bad_form;
use crate::signed_in::SignedIn;
use crate::{ToolCaller, UiState};
use agentprocess_gateway::Identity;
use agentprocess_gateway::mcp::{RunRead, ToolBackend, ToolName, ToolResult};
use agentprocess_gateway::trust::{self, CollectedReport, Counts, DEFAULT_TRUST_RUNS, StepTrust, TrustError};
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;

/// The pages' tools as the [`ToolBackend`] the report reads through, so the page and
/// `GET /admin/v1/trust` make the report with the same code.
struct PagesBackend(Arc<dyn ToolCaller>);

impl ToolBackend for PagesBackend {
    fn call(
        &self,
        identity: &Identity,
        tool: ToolName,
        arguments: Value,
    ) -> impl Future<Output = ToolResult> + Send {
        // The trait's future borrows nothing: it owns the tools and the identity.
        let (runs, identity) = (self.0.clone(), identity.clone());
        async move { runs.run_tool(&identity, tool, arguments).await }
    }

    fn read_run(
        &self,
        identity: &Identity,
        read: RunRead,
        run_id: &str,
    ) -> impl Future<Output = ToolResult> + Send {
        let (runs, identity, run_id) = (self.0.clone(), identity.clone(), run_id.to_owned());
        async move { runs.read_run(&identity, read, &run_id).await }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct TrustQuery {
    process: String,
}

/// `GET /ui/trust`.
pub async fn trust_page(
    State(state): State<Arc<UiState>>,
    signed_in: SignedIn,
    RawQuery(query): RawQuery,
) -> Response {
    if let Some(forbidden) = operators_only(&signed_in) {
        return forbidden;
    }
    let Some(admin) = &state.admin else {
        return message_page(
            StatusCode::NOT_FOUND,
            "No trust report here",
            "This server keeps no catalog, so it has no process to report on.",
            Some(&signed_in),
        );
    };
    let Ok(query) = serde_urlencoded::from_str::<TrustQuery>(query.as_deref().unwrap_or("")) else {
        return bad_form("The address's query could not be read.");
    };
    let catalog = &admin.parts.catalog;
    let processes: Vec<String> = match catalog.processes(&signed_in.identity.organization).await {
        Ok(entries) => entries
            .into_iter()
            .filter(|entry| entry.latest_version.is_some())
            .map(|entry| entry.name)
            .collect(),
        Err(error) => {
            tracing::error!(%error, "cannot list the processes for the trust report");
            return unavailable(&signed_in);
        }
    };
    let process = query.process.trim();
    let mut process_error = None;
    let mut report = None;
    if !process.is_empty() {
        if processes.iter().any(|name| name == process) {
            let backend = PagesBackend(state.runs.clone());
            match trust::collect(
                &backend,
                catalog,
                &signed_in.identity,
                process,
                DEFAULT_TRUST_RUNS,
            )
            .await
            {
                Ok(collected) => report = Some(collected),
                Err(TrustError::Refused { error, .. }) => {
                    return refusal_page("The trust report cannot be made", &error, &signed_in);
                }
                Err(error) => {
                    tracing::error!(%error, "trust report failed");
                    return unavailable(&signed_in);
                }
            }
        } else {
            process_error = Some(format!("No published process is called \"{process}\"."));
        }
    }
    let main = html! {
        h1 { "Trust" }
        p { "How often approvers agreed with each check's verdict, to tell when an advisory check has earned the right to block." }
        (process_form(&processes, process, process_error.as_deref()))
        @if let Some(collected) = &report { (report_section(collected)) }
    };
    Page {
        title: "Trust",
        signed_in: Some(&signed_in),
        main,
    }
    .render(StatusCode::OK)
}

fn unavailable(signed_in: &SignedIn) -> Response {
    message_page(
        StatusCode::SERVICE_UNAVAILABLE,
        "The trust report cannot be made now",
        "The runs or the catalog cannot be read right now. Try again in a moment.",
        Some(signed_in),
    )
}

fn process_form(processes: &[String], chosen: &str, error: Option<&str>) -> Markup {
    html! {
        form method="get" action="/ui/trust" class="filters" novalidate {
            div class="field" {
                label for="process" { "Process" }
                @if let Some(message) = error { span class="error" id="process-error" { (message) } }
                select id="process" name="process" aria-describedby=[error.map(|_| "process-error")]
                    aria-invalid=[error.map(|_| "true")] {
                    option value="" selected[chosen.is_empty()] { "Choose a process" }
                    @for name in processes {
                        option value=(name) selected[name == chosen] { (name) }
                    }
                }
            }
            div class="actions" { button type="submit" { "Show the report" } }
        }
    }
}

fn report_section(collected: &CollectedReport) -> Markup {
    let report = &collected.report;
    html! {
        h2 { "Report for " (report.process) }
        p class="trust-runs" { (report.runs) " live runs read." }
        @if collected.truncated {
            p class="notice" { "The process has more runs than one report reads (" (DEFAULT_TRUST_RUNS) "): the newest are left out." }
        }
        @if report.steps.is_empty() {
            p { "No checked step has a verdict yet." }
        }
        @for (version, steps) in by_version(&report.steps) {
            section class="trust-version" aria-labelledby={ "version-" (version) } {
                h2 id={ "version-" (version) } { "Version " (version) }
                @for step in steps { (step_section(step)) }
            }
        }
    }
}

/// The rows of the report grouped by version, in the report's order (newest version first).
fn by_version(steps: &[StepTrust]) -> Vec<(u64, Vec<&StepTrust>)> {
    let mut groups: Vec<(u64, Vec<&StepTrust>)> = Vec::new();
    for step in steps {
        match groups.last_mut() {
            Some((version, rows)) if *version == step.version => rows.push(step),
            _ => groups.push((step.version, vec![step])),
        }
    }
    groups
}

/// `agreed / (agreed + disagreed)` as a percentage with its counts, or why there is none.
pub fn agreement_text(counts: &Counts) -> String {
    match counts.agreement() {
        Some(share) => format!(
            "{:.0}% ({} of {} decided verdicts)",
            share * 100.0,
            counts.agreed,
            counts.agreed + counts.disagreed
        ),
        None => "none decided yet".to_owned(),
    }
}

fn step_section(step: &StepTrust) -> Markup {
    let id = format!("v{}-{}", step.version, step.step);
    html! {
        section class="trust-step" aria-labelledby=(id) data-step=(step.step) data-version=(step.version) {
            h3 id=(id) { code { (step.step) } " · " @if step.advisory { "advisory check" } @else { "blocking check" } }
            p class="agreement" { "Agreement: " strong { (agreement_text(&step.counts)) } }
            (counts_list(&step.counts))
            h4 { "Over time, per day" }
            div class="table-scroll" role="region" aria-label={ "Verdicts per day, " (step.step) " v" (step.version) } tabindex="0" {
                table class="trust-days" {
                    thead { tr { th scope="col" { "Day" } th scope="col" { "Agreed" } th scope="col" { "Disagreed" }
                                 th scope="col" { "Unsure" } th scope="col" { "Error" } th scope="col" { "Undecided" } th scope="col" { "Agreement" } } }
                    tbody {
                        @for day in &step.days {
                            tr {
                                th scope="row" { (day.day) }
                                td { (day.counts.agreed) } td { (day.counts.disagreed) } td { (day.counts.unsure) }
                                td { (day.counts.error) } td { (day.counts.undecided) }
                                td { @match day.counts.agreement() { Some(share) => { (format!("{:.0}%", share * 100.0)) }, None => "–" } }
                            }
                        }
                    }
                }
            }
            h4 { "Disagreements" }
            @if step.disagreements.is_empty() {
                p { "None." }
            } @else {
                ul class="disagreements" {
                    @for disagreement in &step.disagreements {
                        li {
                            a href={ "/ui/runs/" (path_segment(&disagreement.run_id)) } { code { (disagreement.run_id) } }
                            " · check said " strong { (disagreement.verdict) } " (" (time(&disagreement.verdict_at)) "), "
                            (disagreement.decided_by) " " strong { (disagreement.decision) } " it at " code { (disagreement.approval_step) }
                            " (" (time(&disagreement.decided_at)) ")"
                            @if let Some(note) = &disagreement.note { ": " (note) }
                        }
                    }
                }
            }
        }
    }
}

fn counts_list(counts: &Counts) -> Markup {
    html! {
        dl class="facts compact trust-counts" {
            dt { "Agreed" } dd data-count="agreed" { (counts.agreed) }
            dt { "Disagreed" } dd data-count="disagreed" { (counts.disagreed) }
            dt { "Unsure" } dd data-count="unsure" { (counts.unsure) }
            dt { "Evaluator error" } dd data-count="error" { (counts.error) }
            dt { "Not decided yet" } dd data-count="undecided" { (counts.undecided) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_is_a_share_of_the_decided_verdicts() {
        let counts = Counts {
            agreed: 3,
            disagreed: 2,
            unsure: 1,
            error: 0,
            undecided: 1,
        };
        assert_eq!(agreement_text(&counts), "60% (3 of 5 decided verdicts)");
        assert_eq!(agreement_text(&Counts::default()), "none decided yet");
    }
}
