//! `GET /ui/overview` (operators): the organization at a glance. Runs of the last day by process
//! and state and by hour, as server-rendered SVG charts with their numbers beside them as text;
//! the work waiting for agents and for people with the oldest item's age; what is overdue; the
//! lease expiries and escalations of the last day. Read through the overview reader the server
//! mounts ([`agentprocess_service::OrgOverview`]), never run by run.

use crate::UiState;
use crate::layout::{Page, message_page};
use crate::operator::NoEntry;
use crate::signed_in::SignedIn;
use agentprocess_service::{OVERVIEW_HOURS, Overview, ProcessOverview, Timestamp};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use std::sync::Arc;

/// Where the overview is served.
pub const OVERVIEW_PATH: &str = "/ui/overview";

/// The states a run of the last day can be in, in the order the charts stack them, with the
/// colour each is drawn in (each at least 3:1 against white, WCAG 1.4.11; the legend's swatches
/// have the same colours in the stylesheet, since pages carry no inline style).
const STATES: [(&str, &str); 4] = [
    ("active", "#1d4ed8"),
    ("waiting", "#b45309"),
    ("ended", "#15803d"),
    ("cancelled", "#b42318"),
];
const STARTED_COLOUR: &str = "#1d4ed8";
const ENDED_COLOUR: &str = "#15803d";

/// `GET /ui/overview`.
pub async fn overview_page(State(state): State<Arc<UiState>>, signed_in: SignedIn) -> Response {
    if !signed_in.identity.operator {
        return NoEntry::NotOperator.page(&signed_in);
    }
    let Some(reader) = &state.overview else {
        return message_page(
            StatusCode::NOT_FOUND,
            "Not available here",
            "This server reads no overview of its runs.",
            Some(&signed_in),
        );
    };
    let overview = match reader.overview(&signed_in.identity.organization).await {
        Ok(overview) => overview,
        Err(error) => {
            tracing::warn!(%error, "the overview cannot be read");
            return message_page(
                StatusCode::SERVICE_UNAVAILABLE,
                "The overview cannot be read right now",
                "The store did not answer. Reload the page in a moment.",
                Some(&signed_in),
            );
        }
    };
    Page {
        title: "Overview",
        signed_in: Some(&signed_in),
        main: overview_main(&overview),
    }
    .render(StatusCode::OK)
}

/// The page's content. PURE.
pub fn overview_main(overview: &Overview) -> Markup {
    let now = overview.at;
    let totals = Totals::of(overview);
    html! {
        h1 { "Overview" }
        p class="muted" { "As of " (now.to_rfc3339()) ". Runs are those started in the last " (OVERVIEW_HOURS) " hours." }
        @if overview.truncated {
            p class="notice" { "There was more to read than one look reads: the counts below are lower bounds." }
        }
        section aria-labelledby="waiting-heading" {
            h2 id="waiting-heading" { "Work waiting" }
            dl class="tiles" {
                div class="tile" {
                    dt { "Agent steps ready" }
                    dd { span class="figure" { (totals.ready_steps) } (oldest(now, totals.oldest_ready)) }
                }
                div class="tile" {
                    dt { "People's queue" }
                    dd { span class="figure" { (totals.work_items) } (oldest(now, totals.oldest_work_item)) }
                }
                div class="tile" {
                    dt { "Overdue" }
                    dd {
                        span class="figure" { (totals.overdue_agent_steps + totals.overdue_work_items) }
                        span class="hint" { (totals.overdue_agent_steps) " agent steps, " (totals.overdue_work_items) " work items" }
                    }
                }
                div class="tile" {
                    dt { "Open escalations" }
                    dd { span class="figure" { (totals.open_escalations) } }
                }
                div class="tile" {
                    dt { "Lease expiries, last " (OVERVIEW_HOURS) " h" }
                    dd { span class="figure" { (overview.lease_expiries) } }
                }
                div class="tile" {
                    dt { "Escalations, last " (OVERVIEW_HOURS) " h" }
                    dd { span class="figure" { (overview.escalations) } }
                }
            }
        }
        section aria-labelledby="states-heading" {
            h2 id="states-heading" { "Runs by process and state" }
            @if overview.processes.values().all(|p| p.runs_by_state.is_empty()) {
                p { "No run started in the last " (OVERVIEW_HOURS) " hours." }
            } @else {
                figure class="chart" {
                    (runs_by_state_chart(overview))
                    figcaption {
                        ul class="legend" {
                            @for (state, _) in STATES {
                                li { span class={ "swatch swatch-" (state) } {} (state) }
                            }
                        }
                    }
                }
                details {
                    summary { "Runs by process and state, as numbers" }
                    div class="table-scroll" tabindex="0" role="region" aria-label="Runs by process and state" {
                        table class="numbers" id="runs-by-state" {
                            thead { tr { th scope="col" { "Process" } @for (state, _) in STATES { th scope="col" { (state) } } } }
                            tbody {
                                @for (name, process) in with_runs(overview) {
                                    tr {
                                        th scope="row" { (name) }
                                        @for (state, _) in STATES {
                                            td { (process.runs_by_state.get(state).copied().unwrap_or(0)) }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        section aria-labelledby="hours-heading" {
            h2 id="hours-heading" { "Runs started and ended per hour" }
            figure class="chart" {
                (per_hour_chart(&overview.started_per_hour, &overview.ended_per_hour))
                figcaption {
                    ul class="legend" {
                        li { span class="swatch swatch-started" {} "started" }
                        li { span class="swatch swatch-ended" {} "ended" }
                    }
                }
            }
            details {
                summary { "Runs per hour, as numbers" }
                div class="table-scroll" tabindex="0" role="region" aria-label="Runs per hour" {
                    table class="numbers" id="runs-per-hour" {
                        thead { tr { th scope="col" { "Hour (UTC)" } th scope="col" { "Started" } th scope="col" { "Ended" } } }
                        tbody {
                            @for hour in 0..OVERVIEW_HOURS {
                                tr {
                                    th scope="row" { (hour_label(now, hour)) }
                                    td { (overview.started_per_hour.get(hour).copied().unwrap_or(0)) }
                                    td { (overview.ended_per_hour.get(hour).copied().unwrap_or(0)) }
                                }
                            }
                        }
                    }
                }
            }
        }
        section aria-labelledby="backlog-heading" {
            h2 id="backlog-heading" { "Waiting, by process" }
            @if overview.processes.values().all(|p| p.ready_steps == 0 && p.work_items == 0) {
                p { "Nothing is waiting." }
            } @else {
                div class="table-scroll" tabindex="0" role="region" aria-label="Waiting, by process" {
                    table class="numbers" id="backlog" {
                        thead {
                            tr {
                                th scope="col" { "Process" }
                                th scope="col" { "Agent steps ready" }
                                th scope="col" { "People's items" }
                                th scope="col" { "Overdue" }
                                th scope="col" { "Escalations" }
                            }
                        }
                        tbody {
                            @for (name, process) in &overview.processes {
                                @if process.ready_steps > 0 || process.work_items > 0 {
                                    tr {
                                        th scope="row" { (name) }
                                        td { (process.ready_steps) (oldest(now, process.oldest_ready)) }
                                        td { (process.work_items) (oldest(now, process.oldest_work_item)) }
                                        td { (process.overdue_agent_steps + process.overdue_work_items) }
                                        td { (process.open_escalations) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The sums over every process.
#[derive(Debug, Default)]
struct Totals {
    ready_steps: u64,
    oldest_ready: Option<Timestamp>,
    work_items: u64,
    oldest_work_item: Option<Timestamp>,
    open_escalations: u64,
    overdue_agent_steps: u64,
    overdue_work_items: u64,
}

impl Totals {
    fn of(overview: &Overview) -> Totals {
        let mut totals = Totals::default();
        for process in overview.processes.values() {
            totals.ready_steps += process.ready_steps;
            totals.oldest_ready = totals.oldest_ready.into_iter().chain(process.oldest_ready).min();
            totals.work_items += process.work_items;
            totals.oldest_work_item = totals
                .oldest_work_item
                .into_iter()
                .chain(process.oldest_work_item)
                .min();
            totals.open_escalations += process.open_escalations;
            totals.overdue_agent_steps += process.overdue_agent_steps;
            totals.overdue_work_items += process.overdue_work_items;
        }
        totals
    }
}

/// ", oldest 3 h 5 min" after a count, or nothing when nothing waits.
fn oldest(now: Timestamp, since: Option<Timestamp>) -> Markup {
    html! {
        @if let Some(since) = since {
            span class="hint" { "oldest " (age(now, since)) }
        }
    }
}

/// How long ago `since` was, in the two largest units: `42 s`, `5 min 3 s`, `3 h 5 min`,
/// `2 d 4 h`. PURE.
pub fn age(now: Timestamp, since: Timestamp) -> String {
    let seconds = ((now.as_millis() - since.as_millis()).max(0) / 1000) as u64;
    let (days, hours, minutes, secs) = (
        seconds / 86_400,
        seconds / 3_600 % 24,
        seconds / 60 % 60,
        seconds % 60,
    );
    match (days, hours, minutes) {
        (0, 0, 0) => format!("{secs} s"),
        (0, 0, _) => format!("{minutes} min {secs} s"),
        (0, _, _) => format!("{hours} h {minutes} min"),
        _ => format!("{days} d {hours} h"),
    }
}

/// The hour `hour` of the window (0 the oldest), as `HH:00`–`HH:00` UTC of its end.
fn hour_label(now: Timestamp, hour: usize) -> String {
    let hours_before_now = (OVERVIEW_HOURS - hour) as i64;
    let start = Timestamp::from_millis(now.as_millis() - hours_before_now * 3_600_000);
    let end = Timestamp::from_millis(start.as_millis() + 3_600_000);
    let clock = |at: Timestamp| at.to_rfc3339().get(11..16).unwrap_or_default().to_string();
    format!("{} to {}", clock(start), clock(end))
}

/// The processes with runs in the window, by name.
fn with_runs(overview: &Overview) -> impl Iterator<Item = (&String, &ProcessOverview)> {
    overview
        .processes
        .iter()
        .filter(|(_, process)| !process.runs_by_state.is_empty())
}

/// One horizontal bar per process, its runs stacked by state: each bar an SVG as wide as the
/// page, its length in runs (the busiest process's bar is full), the process's name and total
/// above it as text, so that they read at any width. PURE.
pub fn runs_by_state_chart(overview: &Overview) -> Markup {
    let rows: Vec<(&String, &ProcessOverview)> = with_runs(overview).collect();
    let total = |process: &ProcessOverview| -> u64 { process.runs_by_state.values().sum() };
    let most = rows
        .iter()
        .map(|(_, process)| total(process))
        .max()
        .unwrap_or(0)
        .max(1);
    html! {
        ul class="bar-rows" {
            @for (name, process) in &rows {
                li {
                    span class="bar-label" { (name) } " "
                    span class="bar-total" { (total(process)) " runs" }
                    svg class="bar" viewBox={ "0 0 " (most) " 1" } preserveAspectRatio="none" role="img"
                        aria-label={ (name) ": " (state_counts(process)) } xmlns="http://www.w3.org/2000/svg" {
                        @for segment in segments(process) {
                            rect x=(segment.x) y="0" width=(segment.count) height="1" fill=(segment.colour)
                                data-state=(segment.state) data-count=(segment.count) {
                                title { (name) ", " (segment.state) ": " (segment.count) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// One state's part of a process's bar.
struct Segment {
    /// Runs before it on the bar.
    x: u64,
    state: &'static str,
    colour: &'static str,
    count: u64,
}

/// The parts of a process's bar, in [`STATES`]' order.
fn segments(process: &ProcessOverview) -> Vec<Segment> {
    let mut x = 0;
    let mut segments = Vec::new();
    for (state, colour) in STATES {
        let count = process.runs_by_state.get(state).copied().unwrap_or(0);
        if count > 0 {
            segments.push(Segment {
                x,
                state,
                colour,
                count,
            });
            x += count;
        }
    }
    segments
}

fn state_counts(process: &ProcessOverview) -> String {
    STATES
        .iter()
        .filter_map(|(state, _)| {
            process
                .runs_by_state
                .get(*state)
                .filter(|count| **count > 0)
                .map(|count| format!("{count} {state}"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Two bars per hour, started beside ended, the oldest hour on the left and the current one on
/// the right: an SVG as wide as the page, two units per hour and one per run, the busiest hour
/// full height; the scale and the hours are text around it. PURE.
pub fn per_hour_chart(started: &[u64], ended: &[u64]) -> Markup {
    let count = |counts: &[u64], hour: usize| counts.get(hour).copied().unwrap_or(0);
    let most = (0..OVERVIEW_HOURS)
        .map(|hour| count(started, hour).max(count(ended, hour)))
        .max()
        .unwrap_or(0)
        .max(1);
    let started_total: u64 = started.iter().sum();
    let ended_total: u64 = ended.iter().sum();
    html! {
        p class="chart-scale" { "At most " (most) " runs in one hour." }
        svg class="hours" viewBox={ "0 0 " (2 * OVERVIEW_HOURS) " " (most) } preserveAspectRatio="none" role="img"
            aria-labelledby="hours-chart-title hours-chart-desc" xmlns="http://www.w3.org/2000/svg" {
            title id="hours-chart-title" { "Runs started and ended per hour, last " (OVERVIEW_HOURS) " hours" }
            desc id="hours-chart-desc" {
                (started_total) " started and " (ended_total) " ended; at most " (most) " in one hour."
            }
            @for hour in 0..OVERVIEW_HOURS {
                @for (offset, value, colour, what) in [(0, count(started, hour), STARTED_COLOUR, "started"), (1, count(ended, hour), ENDED_COLOUR, "ended")] {
                    @if value > 0 {
                        rect x=(2 * hour + offset) y=(most - value) width="0.9" height=(value)
                            fill=(colour) data-hour=(hour) data-series=(what) data-count=(value) {
                            title { (value) " " (what) }
                        }
                    }
                }
            }
        }
        div class="hours-axis" aria-hidden="true" {
            span { "−24 h" } span { "−18 h" } span { "−12 h" } span { "−6 h" } span { "now" }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn process(states: &[(&str, u64)]) -> ProcessOverview {
        ProcessOverview {
            runs_by_state: states
                .iter()
                .map(|(state, count)| (state.to_string(), *count))
                .collect(),
            ..ProcessOverview::default()
        }
    }

    #[test]
    fn bars_are_as_long_as_their_counts_and_names_are_escaped() {
        let overview = Overview {
            processes: BTreeMap::from([
                ("<b>x</b>".to_string(), process(&[("active", 2), ("ended", 2)])),
                ("purchase-request".to_string(), process(&[("waiting", 1)])),
            ]),
            ..Overview::default()
        };
        let svg = runs_by_state_chart(&overview).into_string();
        assert!(svg.contains("&lt;b&gt;x&lt;/b&gt;"), "{svg}");
        assert!(!svg.contains("<b>"), "{svg}");
        // Every bar is as long as the busiest (4 runs); each state's part is as long as its runs.
        assert_eq!(svg.matches(r#"viewBox="0 0 4 1""#).count(), 2, "{svg}");
        assert!(
            svg.contains(
                r##"x="0" y="0" width="2" height="1" fill="#1d4ed8" data-state="active" data-count="2""##
            ),
            "{svg}"
        );
        assert!(
            svg.contains(r##"x="2" y="0" width="2" height="1" fill="#15803d" data-state="ended""##),
            "{svg}"
        );
        assert!(
            svg.contains(
                r##"x="0" y="0" width="1" height="1" fill="#b45309" data-state="waiting" data-count="1""##
            ),
            "{svg}"
        );
        assert!(
            svg.contains(r#"aria-label="purchase-request: 1 waiting""#),
            "{svg}"
        );
    }

    #[test]
    fn hours_are_drawn_oldest_first_scaled_to_the_busiest() {
        let mut started = vec![0; OVERVIEW_HOURS];
        let mut ended = vec![0; OVERVIEW_HOURS];
        started[23] = 4;
        ended[23] = 2;
        started[0] = 1;
        let svg = per_hour_chart(&started, &ended).into_string();
        assert!(svg.contains(r#"viewBox="0 0 48 4""#), "{svg}");
        assert!(
            svg.contains(
                r##"x="46" y="0" width="0.9" height="4" fill="#1d4ed8" data-hour="23" data-series="started""##
            ),
            "{svg}"
        );
        assert!(
            svg.contains(
                r##"x="47" y="2" width="0.9" height="2" fill="#15803d" data-hour="23" data-series="ended""##
            ),
            "{svg}"
        );
        assert!(
            svg.contains(
                r##"x="0" y="3" width="0.9" height="1" fill="#1d4ed8" data-hour="0" data-series="started""##
            ),
            "{svg}"
        );
        assert!(
            svg.contains("5 started and 2 ended; at most 4 in one hour."),
            "{svg}"
        );
        assert_eq!(svg.matches("<rect").count(), 3);
    }

    #[test]
    fn ages_read_in_their_two_largest_units() {
        let now = Timestamp::from_millis(10_000_000_000);
        let ago = |seconds: i64| age(now, Timestamp::from_millis(now.as_millis() - seconds * 1000));
        assert_eq!(ago(42), "42 s");
        assert_eq!(ago(303), "5 min 3 s");
        assert_eq!(ago(3 * 3600 + 5 * 60 + 9), "3 h 5 min");
        assert_eq!(ago(2 * 86_400 + 4 * 3600), "2 d 4 h");
        assert_eq!(ago(-5), "0 s", "a clock behind the entry");
    }
}
