//! What the map draws, read from the process: the lines between steps and each step's lane.

use crate::model::{LineKind, Performer};
use agentprocess_process::{Next, PersonRef, Process, StepKind, Target};

/// What a line leaves or enters, by position in the process's steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum End {
    Start,
    Step(usize),
    /// The join bar of the `parallel:` step at this position.
    Bar(usize),
}

/// One line to draw, before it is placed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FlowLine {
    pub from: End,
    pub to: End,
    pub kind: LineKind,
    pub label: Option<String>,
}

/// The process as the map reads it.
#[derive(Debug, Clone)]
pub(crate) struct Flow {
    pub performers: Vec<Performer>,
    /// Index into `performers` for each step.
    pub lane_of: Vec<usize>,
    /// Every line, grouped by the step that declares it, in document order.
    pub lines: Vec<FlowLine>,
}

impl Flow {
    pub(crate) fn read(process: &Process) -> Flow {
        let branch_of = parallel_of(process);
        let lines = lines(process, &branch_of);
        let (performers, lane_of) = lanes(process, &lines);
        Flow {
            performers,
            lane_of,
            lines,
        }
    }
}

/// For each step, the position of the `parallel:` step whose branch holds it (parallel-1 §2:
/// a branch is its entry plus every step reached from it along `next` and `on_timeout`,
/// stopping at `join`).
fn parallel_of(process: &Process) -> Vec<Option<usize>> {
    let mut owner = vec![None; process.steps.len()];
    for (p, step) in process.steps.iter().enumerate() {
        let StepKind::Parallel { branches } = &step.kind else {
            continue;
        };
        let mut queue: Vec<usize> = branches.iter().filter_map(|id| process.step_index(id)).collect();
        while let Some(at) = queue.pop() {
            if owner[at].is_some() {
                continue;
            }
            owner[at] = Some(p);
            for target in forward_targets(process, at) {
                if let Some(next) = target.step().and_then(|id| process.step_index(id)) {
                    queue.push(next);
                }
            }
        }
    }
    owner
}

/// Where a step can go forward: its `next` (declared, a route, or the following step) and its
/// `on_timeout`. A `parallel:` step's branches are not among them.
fn forward_targets(process: &Process, at: usize) -> Vec<Target> {
    let step = &process.steps[at];
    let mut targets = Vec::new();
    match &step.next {
        Some(Next::Routes(routes)) => targets.extend(routes.iter().map(|r| r.to.clone())),
        _ => targets.extend(process.default_next(step)),
    }
    if let StepKind::WaitFor {
        on_timeout: Some(target),
        ..
    } = &step.kind
    {
        targets.push(target.clone());
    }
    targets
}

/// Every line the document declares, by the guide's table: a Start line, a line per route of a
/// `next` list, Approved and Rejected lines for an approval, branch lines and a join line for a
/// `parallel:` step, and a plain line for every other `next` and `on_timeout`.
fn lines(process: &Process, branch_of: &[Option<usize>]) -> Vec<FlowLine> {
    let mut lines = vec![FlowLine {
        from: End::Start,
        to: End::Step(0),
        kind: LineKind::Start,
        label: None,
    }];
    for (at, step) in process.steps.iter().enumerate() {
        let end = |target: &Target| -> Option<End> {
            match target {
                Target::Step(id) => process.step_index(id).map(End::Step),
                Target::Join => branch_of[at].map(End::Bar),
            }
        };
        let mut push = |from: End, target: Option<Target>, kind: LineKind, label: Option<String>| {
            if let Some(to) = target.as_ref().and_then(end) {
                lines.push(FlowLine {
                    from,
                    to,
                    kind,
                    label,
                });
            }
        };
        let from = End::Step(at);
        let next = process.default_next(step);
        match &step.kind {
            StepKind::Agent { .. } | StepKind::Task { .. } => match &step.next {
                Some(Next::Routes(routes)) => {
                    for route in routes {
                        push(from, Some(route.to.clone()), LineKind::Route, route.when.clone());
                    }
                }
                _ => push(from, next, LineKind::Next, None),
            },
            StepKind::Approve { on_reject, .. } => {
                push(from, next, LineKind::Approved, Some("Approved".into()));
                let back = on_reject.clone().map(Target::Step);
                push(from, back, LineKind::Rejected, Some("Rejected".into()));
            }
            StepKind::Wait { .. } | StepKind::WaitUntil { .. } => push(from, next, LineKind::Next, None),
            StepKind::WaitFor {
                timeout, on_timeout, ..
            } => {
                push(from, next, LineKind::Next, None);
                let label = match timeout {
                    Some(duration) => format!("Timeout {duration}"),
                    None => "On timeout".to_string(),
                };
                push(from, on_timeout.clone(), LineKind::Timeout, Some(label));
            }
            StepKind::Finish { .. } => {}
            StepKind::Parallel { branches } => {
                for entry in branches {
                    push(from, Some(Target::Step(entry.clone())), LineKind::Branch, None);
                }
                push(End::Bar(at), next, LineKind::Join, None);
            }
        }
    }
    lines
}

/// The lanes and each step's lane (authoring guide, "How each part is drawn": *Agent* for
/// `agent:` steps, then one lane per role or person named in `task:` and `approve:` steps;
/// waits and finishes sit in the lane of the step before them).
///
/// The Agent lane is drawn when an agent step exists, or when no person does a step at all
/// (the map still needs a lane). "The step before" a step that no performer does is the first
/// step, in document order, with a forward line into it; a join bar's line counts as its
/// `parallel:` step's. With none (the first step), it sits in the top lane.
fn lanes(process: &Process, lines: &[FlowLine]) -> (Vec<Performer>, Vec<usize>) {
    let any_agent = process
        .steps
        .iter()
        .any(|s| matches!(s.kind, StepKind::Agent { .. }));
    let mut performers: Vec<Performer> = Vec::new();
    for step in &process.steps {
        if let Some(person) = step.person() {
            let performer = match person {
                PersonRef::Role(name) => Performer::Role(name.clone()),
                PersonRef::Initiator => Performer::Initiator,
                PersonRef::Path(path) => Performer::Data(path.to_string()),
            };
            if !performers.contains(&performer) {
                performers.push(performer);
            }
        }
    }
    if any_agent || performers.is_empty() {
        performers.insert(0, Performer::Agent);
    }
    let own_lane = |at: usize| -> Option<usize> {
        let step = &process.steps[at];
        let performer = match (&step.kind, step.person()) {
            (StepKind::Agent { .. }, _) => Performer::Agent,
            (_, Some(PersonRef::Role(name))) => Performer::Role(name.clone()),
            (_, Some(PersonRef::Initiator)) => Performer::Initiator,
            (_, Some(PersonRef::Path(path))) => Performer::Data(path.to_string()),
            (_, None) => return None,
        };
        performers.iter().position(|p| *p == performer)
    };
    let step_before = |at: usize| -> Option<usize> {
        lines
            .iter()
            .filter(|line| line.to == End::Step(at) && !matches!(line.kind, LineKind::Rejected))
            .find_map(|line| match line.from {
                End::Step(from) | End::Bar(from) => Some(from),
                End::Start => None,
            })
    };
    let mut lane_of: Vec<Option<usize>> = (0..process.steps.len()).map(own_lane).collect();
    for at in 0..process.steps.len() {
        // Follow the steps before until one has a lane; a chain longer than the process
        // would be a cycle, which a valid process cannot have along forward lines.
        let mut chain = vec![at];
        let mut lane = None;
        while let Some(&last) = chain.last() {
            if let Some(found) = lane_of[last] {
                lane = Some(found);
                break;
            }
            match step_before(last) {
                Some(before) if chain.len() <= process.steps.len() => chain.push(before),
                _ => break,
            }
        }
        let lane = lane.unwrap_or(0);
        for step in chain {
            lane_of[step].get_or_insert(lane);
        }
    }
    (performers, lane_of.into_iter().map(|l| l.unwrap_or(0)).collect())
}
