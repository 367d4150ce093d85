//! The runs table of `/ui/runs`, pure: a row per run (its `list_runs` item, run view and, for
//! operators, inspection), the sorts a page can honour, and the table with its sort links.

use super::time;
use super::timeline::text;
use crate::layout::path_segment;
use agentprocess_service::Timestamp;
use maud::{Markup, html};
use serde_json::Value;

/// How many input values a row shows.
const INPUTS_SHOWN: usize = 3;
/// How much of an input value a row shows before it cuts the rest.
const INPUT_CHARACTERS_SHOWN: usize = 40;
/// The run states in the order a run passes through them (spec §3 run states).
const STATE_ORDER: [&str; 4] = ["active", "waiting", "ended", "cancelled"];

/// A row: the listing's item and what the caller could read of the run besides.
#[derive(Debug, Clone)]
pub struct Row {
    /// The `list_runs` item; from the stuck listing, with its `stuck` step.
    pub item: Value,
    /// The run view (`get_run`): mode, steps, overdue.
    pub view: Option<Value>,
    /// The operator's inspection: who holds each claim until when, how often leases lapsed.
    pub inspection: Option<Value>,
}

/// A step of a run that is not done and not yet left behind: ready, claimed or waiting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentStep {
    pub id: String,
    pub state: String,
    /// Who holds the claim and until when, from the inspection.
    pub claim: Option<(String, String)>,
    /// How many claims of it lapsed, from the inspection.
    pub lease_expiries: u64,
}

impl Row {
    pub fn is_test(&self) -> bool {
        self.view
            .as_ref()
            .is_some_and(|view| view["run"]["mode"] == "test")
    }

    pub fn is_overdue(&self) -> bool {
        self.view.as_ref().is_some_and(|view| {
            view["steps"]
                .as_array()
                .is_some_and(|steps| steps.iter().any(|step| step["overdue"] == true))
        })
    }

    /// The run's current steps in the process's order, each with its claim where the
    /// inspection says.
    pub fn current_steps(&self) -> Vec<CurrentStep> {
        let Some(view) = &self.view else {
            return Vec::new();
        };
        let inspected = |id: &str| {
            self.inspection.as_ref().and_then(|inspection| {
                inspection["steps"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|step| step["id"] == id)
            })
        };
        view["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|step| matches!(step["state"].as_str(), Some("ready" | "claimed" | "waiting")))
            .map(|step| {
                let id = text(&step["id"]);
                let inspected = inspected(&id);
                let claim = inspected.and_then(|step| step["claim"].as_object()).map(|claim| {
                    (
                        claim.get("holder").map(text).unwrap_or_default(),
                        claim.get("expiresAt").map(text).unwrap_or_default(),
                    )
                });
                CurrentStep {
                    state: text(&step["state"]),
                    claim,
                    lease_expiries: inspected
                        .and_then(|step| step["leaseExpiries"].as_u64())
                        .unwrap_or(0),
                    id,
                }
            })
            .collect()
    }

    /// The first input values, `(name, value)`, each cut to a readable length.
    pub fn first_inputs(&self) -> Vec<(String, String)> {
        self.item["inputs"]
            .as_object()
            .into_iter()
            .flatten()
            .take(INPUTS_SHOWN)
            .map(|(name, value)| (name.clone(), shortened(&text(value))))
            .collect()
    }
}

fn shortened(value: &str) -> String {
    if value.chars().count() <= INPUT_CHARACTERS_SHOWN {
        return value.to_owned();
    }
    let kept: String = value.chars().take(INPUT_CHARACTERS_SHOWN - 1).collect();
    format!("{kept}…")
}

/// A span of whole seconds as people say it: `under a minute`, `5 min`, `2 h 5 min`, `3 d 4 h`.
pub fn age(seconds: u64) -> String {
    let minutes = seconds / 60;
    let hours = minutes / 60;
    let days = hours / 24;
    match (days, hours, minutes) {
        (0, 0, 0) => "under a minute".to_owned(),
        (0, 0, minutes) => format!("{minutes} min"),
        (0, hours, minutes) => format!("{hours} h {} min", minutes % 60),
        (days, hours, _) => format!("{days} d {} h", hours % 24),
    }
}

/// Whole seconds from the RFC 3339 time `since` to `now`; `None` when it does not parse.
fn seconds_since(since: &str, now: Timestamp) -> Option<u64> {
    let since = Timestamp::parse_rfc3339(since)?;
    Some(u64::try_from((now.as_millis() - since.as_millis()) / 1000).unwrap_or(0))
}

/// What a page may be sorted by. Pages come in the listing's order (`list_runs`: the order runs
/// started, oldest first; the stuck listing: the longest waiting first), which no page can
/// change without reading every run: a sort orders the runs of the page shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Started,
    Updated,
    Process,
    State,
}

impl SortKey {
    pub const ALL: [SortKey; 4] = [
        SortKey::Started,
        SortKey::Updated,
        SortKey::Process,
        SortKey::State,
    ];

    /// The name in the address (`?sort=started`).
    pub fn name(self) -> &'static str {
        match self {
            SortKey::Started => "started",
            SortKey::Updated => "updated",
            SortKey::Process => "process",
            SortKey::State => "state",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            SortKey::Started => "Started",
            SortKey::Updated => "Updated",
            SortKey::Process => "Process",
            SortKey::State => "State",
        }
    }

    fn of_name(name: &str) -> Option<SortKey> {
        SortKey::ALL.into_iter().find(|key| key.name() == name)
    }
}

/// A sort the address asked for: a key and a direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sort {
    pub key: SortKey,
    pub descending: bool,
}

impl Sort {
    /// The sort of `?sort=KEY&order=asc|desc`; `None` (the listing's order) for no key or one
    /// this page does not know. Without an order, ascending.
    pub fn parse(sort: &str, order: &str) -> Option<Sort> {
        Some(Sort {
            key: SortKey::of_name(sort)?,
            descending: order == "desc",
        })
    }

    /// `asc` or `desc`, as the address says it.
    pub fn order_name(self) -> &'static str {
        if self.descending { "desc" } else { "asc" }
    }

    /// Orders `rows` by this sort; rows alike keep the listing's order.
    pub fn apply(self, rows: &mut [Row]) {
        let state_rank = |row: &Row| {
            let state = row.item["state"].as_str().unwrap_or_default();
            STATE_ORDER
                .iter()
                .position(|known| *known == state)
                .unwrap_or(STATE_ORDER.len())
        };
        rows.sort_by(|a, b| {
            let ordering = match self.key {
                // RFC 3339 times in UTC from one server sort as their instants do once parsed.
                SortKey::Started | SortKey::Updated => {
                    let field = if self.key == SortKey::Started {
                        "startedAt"
                    } else {
                        "updatedAt"
                    };
                    let at =
                        |row: &Row| Timestamp::parse_rfc3339(row.item[field].as_str().unwrap_or_default());
                    at(a).cmp(&at(b))
                }
                SortKey::Process => (text(&a.item["process"]), a.item["version"].as_u64())
                    .cmp(&(text(&b.item["process"]), b.item["version"].as_u64())),
                SortKey::State => state_rank(a).cmp(&state_rank(b)),
            };
            if self.descending {
                ordering.reverse()
            } else {
                ordering
            }
        });
    }
}

/// How the table is ordered, for its caption and its headers' `aria-sort`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ordering {
    /// `list_runs`' own order: the order runs started, oldest first, across pages.
    StartOrder,
    /// The stuck listing's order: the longest waiting step first, across pages.
    LongestWaitingFirst,
    /// The page shown, sorted.
    Sorted(Sort),
}

impl Ordering {
    fn caption(self) -> String {
        match self {
            Ordering::StartOrder => {
                "Runs in the order they started, oldest first, page after page.".to_owned()
            }
            Ordering::LongestWaitingFirst => {
                "Stuck runs, the longest waiting first, page after page.".to_owned()
            }
            Ordering::Sorted(sort) => format!(
                "The runs of this page by {}, {}. Pages follow the listing's order; a sort orders the page shown.",
                sort.key.label().to_lowercase(),
                match (sort.key, sort.descending) {
                    (SortKey::Started | SortKey::Updated, false) => "oldest first",
                    (SortKey::Started | SortKey::Updated, true) => "newest first",
                    (SortKey::Process, false) => "A to Z",
                    (SortKey::Process, true) => "Z to A",
                    (SortKey::State, false) => "active to cancelled",
                    (SortKey::State, true) => "cancelled to active",
                }
            ),
        }
    }

    /// A column's `aria-sort`, where the table is ordered by it.
    fn aria_sort(self, key: SortKey) -> Option<&'static str> {
        match self {
            Ordering::StartOrder if key == SortKey::Started => Some("ascending"),
            Ordering::Sorted(sort) if sort.key == key => Some(if sort.descending {
                "descending"
            } else {
                "ascending"
            }),
            _ => None,
        }
    }

    /// The sort a column's header link asks for: the other direction where the table is
    /// ordered by it, else ascending.
    fn next_sort(self, key: SortKey) -> Sort {
        Sort {
            key,
            descending: self.aria_sort(key) == Some("ascending"),
        }
    }
}

/// The table: a row per run, a sort link in each sortable header. `sort_link` makes the
/// address of a sort (the same filters and page); ages are measured to `now`.
pub fn runs_table(
    rows: &[Row],
    ordering: Ordering,
    now: Timestamp,
    sort_link: impl Fn(Sort) -> String,
) -> Markup {
    let header = |key: SortKey| {
        html! {
            th scope="col" aria-sort=[ordering.aria_sort(key)] {
                a href=(sort_link(ordering.next_sort(key))) {
                    (key.label())
                    @match ordering.aria_sort(key) {
                        Some("ascending") => span aria-hidden="true" { " ▲" },
                        Some(_) => span aria-hidden="true" { " ▼" },
                        None => {},
                    }
                }
            }
        }
    };
    html! {
        table class="runs-table" {
            caption { (ordering.caption()) }
            thead {
                tr {
                    th scope="col" { "Run" }
                    (header(SortKey::Process))
                    (header(SortKey::State))
                    th scope="col" { "Current steps" }
                    th scope="col" { "Inputs" }
                    (header(SortKey::Started))
                    (header(SortKey::Updated))
                }
            }
            tbody {
                @for row in rows { (run_row(row, now)) }
            }
        }
    }
}

fn run_row(row: &Row, now: Timestamp) -> Markup {
    let item = &row.item;
    let id = text(&item["id"]);
    let stuck = item["stuck"].as_object();
    let stuck_step = stuck.and_then(|stuck| stuck.get("stepId")).map(text);
    html! {
        tr class="run-row" {
            th scope="row" data-label="Run" {
                a href={ "/ui/runs/" (path_segment(&id)) } { code { (id) } }
                @if row.is_test() { " " span class="tag test" { "Test run" } }
            }
            td data-label="Process" { (text(&item["process"])) " v" (text(&item["version"])) }
            td data-label="State" {
                span {
                    span class={ "state state-" (text(&item["state"])) } { (text(&item["state"])) }
                    @if let Some(outcome) = item["outcome"].as_str() { " (" (outcome) ")" }
                    @if row.is_overdue() { " " span class="tag overdue" { "Overdue" } }
                    @if stuck.is_some() { " " span class="tag stuck" { "Stuck" } }
                }
            }
            td data-label="Current steps" {
                @let steps = row.current_steps();
                @if steps.is_empty() {
                    span class="muted" { "None" }
                } @else {
                    ul {
                        @for step in &steps {
                            li {
                                code { (step.id) } " " (step.state)
                                @if stuck_step.as_deref() == Some(step.id.as_str()) {
                                    @if let Some(waited) = stuck.and_then(|stuck| stuck.get("ageSeconds")).and_then(Value::as_u64) {
                                        span class="detail" { "unclaimed for " (age(waited)) }
                                    }
                                }
                                @if let Some((holder, until)) = &step.claim {
                                    span class="detail claim" { "held by " (holder) " until " (time(until)) }
                                }
                                @if step.lease_expiries > 0 {
                                    span class="detail lapses" {
                                        (step.lease_expiries) @if step.lease_expiries == 1 { " claim lapsed" } @else { " claims lapsed" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            td data-label="Inputs" {
                @let inputs = row.first_inputs();
                @if inputs.is_empty() {
                    span class="muted" { "None" }
                } @else {
                    ul {
                        @for (name, value) in &inputs { li { (name) ": " (value) } }
                    }
                }
            }
            td data-label="Started" {
                span {
                    (time(&text(&item["startedAt"])))
                    @if let Some(seconds) = seconds_since(&text(&item["startedAt"]), now) {
                        span class="detail" { (age(seconds)) " ago" }
                    }
                }
            }
            td data-label="Updated" { (time(&text(&item["updatedAt"]))) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(id: &str, process: &str, state: &str, started: &str) -> Row {
        Row {
            item: json!({ "id": id, "process": process, "version": 1, "state": state,
                          "startedAt": started, "updatedAt": started, "inputs": {} }),
            view: None,
            inspection: None,
        }
    }

    fn ids(rows: &[Row]) -> Vec<String> {
        rows.iter().map(|row| text(&row.item["id"])).collect()
    }

    #[test]
    fn ages_read_in_the_largest_units_that_matter() {
        assert_eq!(age(59), "under a minute");
        assert_eq!(age(60), "1 min");
        assert_eq!(age(2 * 3600 + 5 * 60 + 7), "2 h 5 min");
        assert_eq!(age(3 * 86400 + 4 * 3600 + 59 * 60), "3 d 4 h");
    }

    #[test]
    fn a_sort_orders_the_page_and_alike_rows_keep_the_listing_order() {
        let listed = vec![
            row("r1", "b", "ended", "2026-10-06T09:00:00Z"),
            row("r2", "a", "active", "2026-10-06T11:00:00.500Z"),
            row("r3", "b", "waiting", "2026-10-06T11:00:00Z"),
            row("r4", "a", "cancelled", "2026-10-06T10:00:00Z"),
        ];
        let sorted = |sort: &str, order: &str| {
            let mut rows = listed.clone();
            Sort::parse(sort, order).unwrap().apply(&mut rows);
            ids(&rows)
        };
        // The time with milliseconds is the later one, though it sorts first as text.
        assert_eq!(sorted("started", "desc"), ["r2", "r3", "r4", "r1"]);
        assert_eq!(sorted("started", "asc"), ["r1", "r4", "r3", "r2"]);
        assert_eq!(sorted("process", "asc"), ["r2", "r4", "r1", "r3"]);
        assert_eq!(sorted("state", "asc"), ["r2", "r3", "r1", "r4"]);
        assert_eq!(sorted("state", "desc"), ["r4", "r1", "r3", "r2"]);
        assert_eq!(Sort::parse("", "desc"), None);
        assert_eq!(Sort::parse("holder", "asc"), None);
    }

    #[test]
    fn headers_say_the_order_and_link_to_the_other_direction() {
        let started = Ordering::StartOrder;
        assert_eq!(started.aria_sort(SortKey::Started), Some("ascending"));
        assert_eq!(started.aria_sort(SortKey::State), None);
        assert_eq!(
            started.next_sort(SortKey::Started),
            Sort::parse("started", "desc").unwrap()
        );
        assert_eq!(
            started.next_sort(SortKey::State),
            Sort::parse("state", "asc").unwrap()
        );
        let by_state = Ordering::Sorted(Sort::parse("state", "desc").unwrap());
        assert_eq!(by_state.aria_sort(SortKey::State), Some("descending"));
        assert_eq!(by_state.aria_sort(SortKey::Started), None);
        assert_eq!(
            by_state.next_sort(SortKey::State),
            Sort::parse("state", "asc").unwrap()
        );
        assert_eq!(Ordering::LongestWaitingFirst.aria_sort(SortKey::Started), None);
    }

    #[test]
    fn current_steps_carry_the_claim_and_lapses_of_the_inspection() {
        let mut row = row("r1", "p", "active", "2026-10-06T09:00:00Z");
        row.view = Some(json!({ "steps": [
            { "id": "screen", "state": "claimed" }, { "id": "file", "state": "ready" },
            { "id": "intake", "state": "done" }, { "id": "end", "state": null } ] }));
        row.inspection = Some(json!({ "steps": [
            { "id": "intake", "state": "done", "leaseExpiries": 0 },
            { "id": "screen", "state": "claimed", "leaseExpiries": 2,
              "claim": { "holder": "a_screener", "expiresAt": "2026-10-06T09:05:00Z" } },
            { "id": "file", "state": "ready", "leaseExpiries": 0 } ] }));
        assert_eq!(
            row.current_steps(),
            vec![
                CurrentStep {
                    id: "screen".into(),
                    state: "claimed".into(),
                    claim: Some(("a_screener".into(), "2026-10-06T09:05:00Z".into())),
                    lease_expiries: 2,
                },
                CurrentStep {
                    id: "file".into(),
                    state: "ready".into(),
                    claim: None,
                    lease_expiries: 0,
                },
            ]
        );
        row.inspection = None;
        assert_eq!(row.current_steps()[0].claim, None);
    }

    #[test]
    fn the_first_inputs_show_cut_to_a_readable_length() {
        let mut row = row("r1", "p", "active", "t");
        let long = "x".repeat(60);
        row.item["inputs"] = json!({ "a": 1, "b": long, "c": true, "d": "not shown" });
        let shown = row.first_inputs();
        assert_eq!(shown.len(), 3);
        assert_eq!(shown[0], ("a".to_owned(), "1".to_owned()));
        assert_eq!(shown[1].1.chars().count(), INPUT_CHARACTERS_SHOWN);
        assert!(shown[1].1.ends_with('…'));
    }
}
