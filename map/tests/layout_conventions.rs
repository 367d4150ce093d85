//! The layout on small hand-written documents, one convention of the authoring guide's
//! "Process maps" page ("How each part is drawn", "Write steps that map well") per test.

use agentprocess_map::model::{
    BadgeKind, CardKind, Endpoint, LineKind, LineStyle, MarkerKind, Performer, Rect,
};
use agentprocess_map::{Highlight, ProcessMap, layout, render_svg};
use agentprocess_process::{Offer, StepId, load};

fn map(frontmatter: &str) -> ProcessMap {
    let document = format!("---\n{frontmatter}---\n\nBody.\n");
    let loaded = load(document.as_bytes(), &Offer::EVERYTHING).unwrap_or_else(|issues| panic!("{issues:?}"));
    layout(&loaded.process)
}

fn step(id: &str) -> Endpoint {
    Endpoint::Step(StepId::new(id).unwrap())
}

fn card_rect(map: &ProcessMap, id: &str) -> Rect {
    if let Some(card) = map.cards.iter().find(|c| c.step.as_str() == id) {
        return card.rect;
    }
    map.markers
        .iter()
        .find(|m| matches!(&m.kind, MarkerKind::End { step, .. } if step.as_str() == id))
        .map(|m| m.rect)
        .unwrap_or_else(|| panic!("no card for {id}"))
}

fn lane_of<'a>(map: &'a ProcessMap, id: &str) -> &'a Performer {
    let lane = map
        .cards
        .iter()
        .find(|c| c.step.as_str() == id)
        .map(|c| c.lane)
        .or_else(|| {
            map.markers
                .iter()
                .find(|m| matches!(&m.kind, MarkerKind::End { step, .. } if step.as_str() == id))
                .map(|m| m.lane)
        })
        .unwrap();
    &map.lanes[lane].performer
}

/// The guide's own example, supplier onboarding.
const SUPPLIER_ONBOARDING: &str = "\
name: supplier-onboarding
description: Check a new supplier against sanctions lists and get finance approval.
inputs:
  vendorName: string
steps:
  - id: check_vendor
    agent: Check the vendor against the OFAC and EU sanctions lists. Attach the report.
    output: { cleared: boolean }
    evidence: [file]
    next:
      - { to: approve, when: Vendor is cleared on both lists }
      - { to: decline, when: Any sanctions hit }
  - id: approve
    person: finance-approver
    approve: Approve only when the vendor is cleared and the spend is justified.
    on_reject: check_vendor
    next: done
  - id: decline
    finish: declined
  - id: done
    finish: onboarded
";

#[test]
fn guide_the_first_step_a_start_marker_leads_into_it() {
    let map = map(SUPPLIER_ONBOARDING);
    let starts: Vec<_> = map
        .markers
        .iter()
        .filter(|m| m.kind == MarkerKind::Start)
        .collect();
    assert_eq!(starts.len(), 1);
    let line = map.lines.iter().find(|l| l.kind == LineKind::Start).unwrap();
    assert_eq!((&line.from, &line.to), (&Endpoint::Start, &step("check_vendor")));
    let first = card_rect(&map, "check_vendor");
    assert_eq!(
        line.points.last().unwrap().x,
        first.x,
        "enters the first card's left side"
    );
    assert!(starts[0].rect.right() <= first.x);
}

#[test]
fn guide_who_does_a_step_agent_lane_first_then_each_role_or_person_in_first_use() {
    let map = map("\
name: lanes
description: Every kind of performer.
inputs:
  manager: person
steps:
  - id: request
    person: initiator
    task: Describe the request.
  - id: review
    person: inputs.manager
    approve: Approve the request.
  - id: record
    agent: Record the approval.
  - id: pay
    person: accounts-payable
    task: Pay it.
  - id: confirm
    person: inputs.manager
    approve: Confirm the payment.
  - id: done
    finish: paid
");
    let lanes: Vec<&Performer> = map.lanes.iter().map(|l| &l.performer).collect();
    assert_eq!(
        lanes,
        [
            &Performer::Agent,
            &Performer::Initiator,
            &Performer::Data("inputs.manager".into()),
            &Performer::Role("accounts-payable".into()),
        ],
        "Agent first although a person does the first step, then each performer once"
    );
    assert_eq!(map.lanes[3].title_lines, ["Accounts payable"]);
    assert_eq!(map.lanes[2].title_lines, ["Manager"]);
    for pair in map.lanes.windows(2) {
        assert!(
            pair[0].rect.bottom() <= pair[1].rect.y,
            "lanes top to bottom, apart"
        );
    }
    for card in &map.cards {
        let lane = map.lanes[card.lane].rect;
        assert!(card.rect.y >= lane.y && card.rect.bottom() <= lane.bottom());
    }
    assert_eq!(
        lane_of(&map, "confirm"),
        &Performer::Data("inputs.manager".into())
    );
}

#[test]
fn guide_who_does_a_step_no_agent_lane_without_an_agent_step() {
    let map = map("\
name: people-only
description: Only people.
steps:
  - id: draft
    person: writer
    task: Write it.
  - id: done
    finish: written
");
    let lanes: Vec<&Performer> = map.lanes.iter().map(|l| &l.performer).collect();
    assert_eq!(lanes, [&Performer::Role("writer".into())]);
}

#[test]
fn guide_waits_and_finishes_sit_in_the_lane_of_the_step_before_them() {
    let map = map("\
name: waits
description: Waits and ends follow the step before them.
inputs:
  at: datetime
steps:
  - id: prepare
    agent: Prepare it.
    next: [publish_time, cancelled]
  - id: publish_time
    wait_until: inputs.at
  - id: publish
    person: editor
    task: Publish it.
  - id: cool_down
    wait: 2d
  - id: done
    finish: published
  - id: cancelled
    finish: cancelled
");
    assert_eq!(lane_of(&map, "publish_time"), &Performer::Agent);
    assert_eq!(lane_of(&map, "cool_down"), &Performer::Role("editor".into()));
    assert_eq!(
        lane_of(&map, "done"),
        &Performer::Role("editor".into()),
        "through the wait before it"
    );
    assert_eq!(
        lane_of(&map, "cancelled"),
        &Performer::Agent,
        "the step that leads into it, not the one above it in the list"
    );
}

#[test]
fn guide_next_as_a_list_a_decision_point_with_one_line_per_route_labelled_with_when() {
    let map = map(SUPPLIER_ONBOARDING);
    let decision = map
        .markers
        .iter()
        .find(|m| matches!(&m.kind, MarkerKind::Decision { step } if step.as_str() == "check_vendor"))
        .expect("a decision point after check_vendor");
    let card = card_rect(&map, "check_vendor");
    assert!(decision.rect.x >= card.right(), "after the step");
    let routes: Vec<_> = map.lines.iter().filter(|l| l.kind == LineKind::Route).collect();
    assert_eq!(routes.len(), 2);
    let labels: Vec<(&Endpoint, &str)> = routes
        .iter()
        .map(|l| (&l.to, l.label.as_ref().unwrap().text.as_str()))
        .collect();
    assert_eq!(
        labels,
        [
            (&step("approve"), "Vendor is cleared on both lists"),
            (&step("decline"), "Any sanctions hit")
        ]
    );
    for route in routes {
        assert_eq!(route.from, step("check_vendor"));
        assert_eq!(
            route.points[0].x,
            decision.rect.right(),
            "leaves from the decision point"
        );
        let label = route.label.as_ref().unwrap();
        assert_eq!(label.lines.len(), 1, "a short when fits on one line");
        assert_eq!(label.lines[0], label.text);
        let last_segment_start = route.points[route.points.len() - 2];
        let end = *route.points.last().unwrap();
        assert!(
            label.rect.x >= last_segment_start.x && label.rect.right() <= end.x,
            "on its last segment"
        );
        assert!(label.rect.bottom() <= end.y, "above the line");
    }
}

#[test]
fn guide_keep_when_labels_short_a_paragraph_is_wrapped_and_cut_never_overlapping() {
    let long = "the vendor is cleared on both lists and the spend is justified by the budget owner who has \
                read the whole report and signed it in the procurement system";
    let map = map(&format!(
        "\
name: long-labels
description: Long when texts.
steps:
  - id: screen
    agent: Screen it.
    next:
      - {{ to: accept, when: {long} }}
      - {{ to: reject, when: {long} }}
      - {{ to: escalate, when: {long} }}
  - id: accept
    finish: accepted
  - id: reject
    finish: rejected_vendor
  - id: escalate
    person: compliance
    task: Decide by hand.
  - id: done
    finish: decided
"
    ));
    let labels: Vec<_> = map.lines.iter().filter_map(|l| l.label.as_ref()).collect();
    assert_eq!(labels.len(), 3);
    for (i, label) in labels.iter().enumerate() {
        assert_eq!(label.text, long, "the whole text is kept for the tooltip");
        assert_eq!(label.lines.len(), 2);
        assert!(label.lines[1].ends_with('…'), "{:?}", label.lines);
        for other in &labels[i + 1..] {
            assert!(!label.rect.overlaps(&other.rect), "labels apart");
        }
        for card in &map.cards {
            assert!(!label.rect.overlaps(&card.rect));
        }
        for marker in &map.markers {
            assert!(!label.rect.overlaps(&marker.rect));
        }
    }
}

#[test]
fn guide_approve_an_approved_line_forward_and_a_dashed_rejected_line_back() {
    let map = map(SUPPLIER_ONBOARDING);
    let approved = map.lines.iter().find(|l| l.kind == LineKind::Approved).unwrap();
    assert_eq!((&approved.from, &approved.to), (&step("approve"), &step("done")));
    assert_eq!(approved.label.as_ref().unwrap().text, "Approved");
    assert_eq!(approved.kind.style(), LineStyle::Solid);
    let rejected = map.lines.iter().find(|l| l.kind == LineKind::Rejected).unwrap();
    assert_eq!(
        (&rejected.from, &rejected.to),
        (&step("approve"), &step("check_vendor"))
    );
    assert_eq!(rejected.label.as_ref().unwrap().text, "Rejected");
    assert_eq!(rejected.kind.style(), LineStyle::Dashed);
    let back = card_rect(&map, "check_vendor");
    let end = *rejected.points.last().unwrap();
    assert!(end.x > back.x && end.x < back.right() && (end.y == back.y || end.y == back.bottom()));
    assert!(rejected.points[0].x > end.x, "goes back, right to left");
    let card = map.cards.iter().find(|c| c.step.as_str() == "approve").unwrap();
    assert_eq!(card.note, None);
}

#[test]
fn guide_approve_without_on_reject_the_card_says_the_run_ends_rejected() {
    let map = map("\
name: sign-off
description: One approval.
steps:
  - id: sign_off
    person: manager
    approve: Sign it off.
  - id: done
    finish: signed
");
    let card = &map.cards[0];
    assert_eq!(card.kind, CardKind::Approve);
    assert_eq!(card.note.as_deref(), Some("If rejected, the run ends rejected."));
    assert!(map.lines.iter().all(|l| l.kind != LineKind::Rejected));
}

#[test]
fn guide_parallel_branches_start_together_and_meet_at_a_join_bar() {
    let map = map("\
name: incident
description: Three leads at once.
steps:
  - id: activate
    agent: Page the leads.
  - id: respond
    parallel: [operations, security, communications]
    next: close
  - id: operations
    person: operations-lead
    task: Restore service.
    next: join
  - id: security
    person: security-lead
    task: Contain it.
    next: verify
  - id: verify
    person: ciso
    approve: Confirm containment.
    on_reject: security
    next: join
  - id: communications
    person: communications-lead
    task: Tell customers.
    next: join
  - id: close
    agent: Close the incident.
  - id: done
    finish: stabilized
");
    assert_eq!(map.join_bars.len(), 1);
    let bar = &map.join_bars[0];
    assert_eq!(bar.parallel.as_str(), "respond");
    let branches: Vec<&Endpoint> = map
        .lines
        .iter()
        .filter(|l| l.kind == LineKind::Branch)
        .map(|l| &l.to)
        .collect();
    assert_eq!(
        branches,
        [&step("operations"), &step("security"), &step("communications")]
    );
    let joining: Vec<_> = map
        .lines
        .iter()
        .filter(|l| {
            l.to == Endpoint::Join {
                parallel: StepId::new("respond").unwrap(),
            }
        })
        .collect();
    let from: Vec<(&Endpoint, LineKind)> = joining.iter().map(|l| (&l.from, l.kind)).collect();
    assert_eq!(
        from,
        [
            (&step("operations"), LineKind::Next),
            (&step("verify"), LineKind::Approved),
            (&step("communications"), LineKind::Next)
        ]
    );
    for line in &joining {
        let end = line.points.last().unwrap();
        assert_eq!(end.x, bar.rect.x, "ends on the bar");
        assert!(end.y > bar.rect.y && end.y < bar.rect.bottom());
    }
    for id in ["operations", "security", "verify", "communications"] {
        assert!(card_rect(&map, id).right() < bar.rect.x, "{id} before the join");
    }
    let after = map.lines.iter().find(|l| l.kind == LineKind::Join).unwrap();
    assert_eq!(
        after.from,
        Endpoint::Join {
            parallel: StepId::new("respond").unwrap()
        }
    );
    assert_eq!(after.to, step("close"));
    assert_eq!(after.points[0].x, bar.rect.right());
    assert!(
        card_rect(&map, "close").x > bar.rect.right(),
        "the process continues after the bar"
    );
    assert!(
        map.cards
            .iter()
            .all(|c| c.rect.right() <= bar.rect.x || c.rect.x >= bar.rect.right()),
        "the bar has its column to itself"
    );
}

#[test]
fn guide_finish_an_end_marker_with_the_outcome() {
    let map = map(SUPPLIER_ONBOARDING);
    let ends: Vec<(&str, &str)> = map
        .markers
        .iter()
        .filter_map(|m| match &m.kind {
            MarkerKind::End { step, outcome, .. } => Some((step.as_str(), outcome.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(ends, [("decline", "declined"), ("done", "onboarded")]);
    assert!(
        map.cards.iter().all(|c| c.step.as_str() != "done"),
        "an End marker, not a card"
    );
}

#[test]
fn guide_read_left_to_right_every_forward_line_goes_right() {
    let map = map(SUPPLIER_ONBOARDING);
    for line in map.lines.iter().filter(|l| !matches!(l.kind, LineKind::Rejected)) {
        let (first, last) = (line.points[0], *line.points.last().unwrap());
        assert!(last.x > first.x, "{line:?}");
        for pair in line.points.windows(2) {
            assert!(pair[0].x == pair[1].x || pair[0].y == pair[1].y, "straight runs");
            assert!(pair[1].x >= pair[0].x, "never doubles back");
        }
    }
}

#[test]
fn guide_a_card_shows_kind_id_instructions_and_badges_for_outputs_evidence_and_checks() {
    let instructions = "Read every receipt and match it to one expense line. ".repeat(8);
    let map = map(&format!(
        "\
name: expenses
description: Check receipts.
steps:
  - id: check_receipts
    agent: {instructions}
    output:
      total: number
      currency: string
      lines: list
      merchant: string
      purpose: string
      approverNote: string
    evidence: [file, link]
    check: The total matches the receipts.
    advisory: true
    due: 4h
  - id: done
    finish: checked
"
    ));
    let card = &map.cards[0];
    assert_eq!(
        (card.kind, card.step.as_str()),
        (CardKind::Agent, "check_receipts")
    );
    assert_eq!(card.title, "Check receipts", "ids read as actions");
    assert_eq!(card.id_text, "check_receipts");
    assert_eq!(card.text_lines.len(), 3, "cut to three lines");
    assert!(card.text_lines[2].ends_with('…'));
    assert_eq!(card.instructions, instructions.trim(), "the whole text is kept");
    let kinds: Vec<BadgeKind> = card.badges.iter().map(|b| b.kind).collect();
    assert_eq!(
        kinds,
        [
            BadgeKind::Output,
            BadgeKind::Evidence,
            BadgeKind::Check,
            BadgeKind::Due
        ]
    );
    let texts: Vec<&str> = card.badges.iter().map(|b| b.text.as_str()).collect();
    assert!(
        texts[0].starts_with("output: total, currency") && texts[0].contains('+'),
        "{texts:?}"
    );
    assert_eq!(
        texts[1..],
        ["evidence: file, link", "advisory check: 1 question", "due 4h"]
    );
    for (i, badge) in card.badges.iter().enumerate() {
        let (b, r) = (badge.rect, card.rect);
        assert!(
            b.x >= r.x && b.right() <= r.right() && b.y >= r.y && b.bottom() <= r.bottom(),
            "{badge:?}"
        );
        for other in &card.badges[i + 1..] {
            assert!(!b.overlaps(&other.rect));
        }
    }
}

#[test]
fn a_process_without_performers_still_has_a_lane() {
    let map = map("\
name: timer
description: Only waits.
steps:
  - id: pause
    wait: 30m
  - id: done
    finish: waited
");
    assert_eq!(map.lanes.len(), 1);
    assert_eq!(map.lanes[0].performer, Performer::Agent);
}

#[test]
fn the_layout_is_deterministic() {
    let first = map(SUPPLIER_ONBOARDING);
    let second = map(SUPPLIER_ONBOARDING);
    assert_eq!(first, second);
    assert_eq!(
        render_svg(&first, &Highlight::none()),
        render_svg(&second, &Highlight::none())
    );
}

#[test]
fn every_text_is_escaped_and_a_run_is_highlighted() {
    let map = map("\
name: escapes
description: \"Markup <b>&</b> in 'quotes' and \\\"double\\\" quotes.\"
steps:
  - id: work
    agent: \"Compare a < b && c > d, then write </svg><script>alert(1)</script>.\"
    next:
      - { to: done, when: \"x < 3 & y > 4\" }
      - { to: later, when: \"\\\"quoted\\\"\" }
  - id: later
    wait: 1d
  - id: done
    finish: \"ok\"
");
    let highlight = Highlight {
        current: vec![StepId::new("later").unwrap()],
        done: vec![StepId::new("work").unwrap()],
    };
    let svg = render_svg(&map, &highlight);
    let xml = roxmltree::Document::parse(&svg).expect("well-formed");
    assert!(!xml.descendants().any(|n| n.has_tag_name("script")));
    let texts: String = xml.descendants().filter_map(|n| n.text()).collect();
    assert!(texts.contains("Compare a < b && c > d"), "{texts}");
    let labels: Vec<&str> = xml
        .descendants()
        .filter_map(|n| n.attribute("data-label"))
        .collect();
    assert_eq!(labels, ["x < 3 & y > 4", "\"quoted\""]);
    let state = |id: &str| {
        xml.descendants()
            .find(|n| n.attribute("data-step") == Some(id))
            .and_then(|n| n.attribute("data-state"))
    };
    assert_eq!(state("later"), Some("current"));
    assert_eq!(state("work"), Some("done"));
    assert_eq!(state("done"), None);
    let plain = render_svg(&map, &Highlight::none());
    assert!(!plain.contains("data-state"));
}
