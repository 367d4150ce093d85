//! Whole-graph rules of spec §2.2: every step reachable, no cycle along `next` and `on_timeout`.

use super::parallel;
use crate::issue::{Issue, index};
use std::collections::HashSet;

/// Where an edge leads: a step by its position, or the end of a `parallel-1` branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Goal {
    Step(usize),
    Join,
}

/// Which key made an edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EdgeKind {
    /// A declared `next`, or one route of a `next` list.
    Next,
    /// No `next` declared: the following step in the list.
    Default,
    OnTimeout,
    /// The only edge that may go back.
    OnReject,
    /// From a `parallel:` step to one of its branch entries.
    Branch,
}

impl EdgeKind {
    /// Whether the acyclicity rule follows this edge (`next`, its default, `on_timeout`).
    pub(super) fn goes_forward(self) -> bool {
        matches!(self, EdgeKind::Next | EdgeKind::Default | EdgeKind::OnTimeout)
    }
}

/// One edge, with the path of the key that made it, for issues.
#[derive(Debug, Clone)]
pub(super) struct Edge {
    pub to: Goal,
    pub path: String,
    pub kind: EdgeKind,
}

/// What the graph rules need of a step whose id and kind are sound.
#[derive(Debug, Clone)]
pub(super) struct Shape {
    pub id: String,
    pub kind: &'static str,
    pub declared_next: bool,
    /// Edges whose targets exist, in written order. Defaults are added by [`check`].
    pub edges: Vec<Edge>,
}

/// Runs the whole-graph rules. `all_edges_read` is false when some edge key could not be
/// read (a target naming no step, a broken route list); reachability is then not judged, since
/// the missing edge would make it report noise.
pub(super) fn check(mut shapes: Vec<Shape>, all_edges_read: bool, issues: &mut Vec<Issue>) {
    let count = shapes.len();
    for (position, shape) in shapes.iter_mut().enumerate() {
        if shape.kind != "finish" && !shape.declared_next && position + 1 < count {
            shape.edges.push(Edge {
                to: Goal::Step(position + 1),
                path: index("steps", position),
                kind: EdgeKind::Default,
            });
        }
    }
    let branch_of = parallel::branches(&shapes, all_edges_read, issues);
    // Inside a branch the following-step default does not apply (parallel-1 §2).
    // A `join` outside every branch ends nothing; reachability past it would only be noise.
    let join_outside = shapes.iter().enumerate().any(|(from, shape)| {
        branch_of[from].is_none() && shape.edges.iter().any(|edge| edge.to == Goal::Join)
    });
    let follows = |from: usize, edge: &Edge| edge.kind != EdgeKind::Default || branch_of[from].is_none();

    if all_edges_read && !join_outside && count > 0 {
        let mut reached = vec![false; count];
        reached[0] = true;
        let mut queue = vec![0];
        while let Some(from) = queue.pop() {
            for edge in shapes[from].edges.iter().filter(|e| follows(from, e)) {
                if let Goal::Step(to) = edge.to
                    && !reached[to]
                {
                    reached[to] = true;
                    queue.push(to);
                }
            }
        }
        for (position, _) in reached.iter().enumerate().filter(|(_, r)| !**r) {
            issues.push(Issue::new(
                index("steps", position),
                "not reachable from the first step",
            ));
        }
    }

    let forward: Vec<Vec<usize>> = shapes
        .iter()
        .enumerate()
        .map(|(from, shape)| {
            let mut targets = Vec::new();
            let mut seen = HashSet::new();
            for edge in shape
                .edges
                .iter()
                .filter(|e| e.kind.goes_forward() && follows(from, e))
            {
                if let Goal::Step(to) = edge.to
                    && seen.insert(to)
                {
                    targets.push(to);
                }
            }
            targets
        })
        .collect();
    for cycle in cycles(&forward) {
        let names: Vec<&str> = cycle
            .iter()
            .chain(cycle.first())
            .map(|&p| shapes[p].id.as_str())
            .collect();
        issues.push(Issue::new(
            index("steps", cycle[0]),
            format!("cycle following next and on_timeout: {}", names.join(" → ")),
        ));
    }
}

/// Every cycle, each once, rotated to start at its earliest step, in discovery order.
///
/// A depth-first search from each unvisited step in list order; every edge back to a step on
/// the current path closes one cycle, and each cycle has exactly one such edge, so none is
/// reported twice. Iterative, so a long chain of steps cannot exhaust the stack.
fn cycles(forward: &[Vec<usize>]) -> Vec<Vec<usize>> {
    const NEW: usize = usize::MAX;
    const DONE: usize = usize::MAX - 1;
    // For each step: NEW, DONE, or its depth on the current path.
    let mut depth = vec![NEW; forward.len()];
    let mut found = Vec::new();
    for start in 0..forward.len() {
        if depth[start] != NEW {
            continue;
        }
        // The current path, each step with how many of its edges were followed.
        let mut path: Vec<(usize, usize)> = vec![(start, 0)];
        depth[start] = 0;
        while let Some(&mut (at, ref mut followed)) = path.last_mut() {
            let Some(&to) = forward[at].get(*followed) else {
                depth[at] = DONE;
                path.pop();
                continue;
            };
            *followed += 1;
            match depth[to] {
                NEW => {
                    depth[to] = path.len();
                    path.push((to, 0));
                }
                DONE => {}
                on_path => {
                    let mut cycle: Vec<usize> = path[on_path..].iter().map(|&(step, _)| step).collect();
                    let earliest = (0..cycle.len()).min_by_key(|&i| cycle[i]).unwrap_or(0);
                    cycle.rotate_left(earliest);
                    found.push(cycle);
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::cycles;

    #[test]
    fn each_cycle_is_found_once_from_its_earliest_step() {
        // 0 → 1 → 2 → 1, 2 → 3 → 3, 4 → 0 (no cycle through 4).
        let forward = vec![vec![1], vec![2], vec![1, 3], vec![3], vec![0]];
        assert_eq!(cycles(&forward), vec![vec![1, 2], vec![3]]);
    }

    #[test]
    fn a_cycle_entered_late_still_starts_at_its_earliest_step() {
        // 0 → 3 → 2 → 1 → 3: the cycle is 1 → 3 → 2 → 1.
        let forward = vec![vec![3], vec![3], vec![1], vec![2]];
        assert_eq!(cycles(&forward), vec![vec![1, 3, 2]]);
    }

    #[test]
    fn no_cycle_in_a_diamond() {
        let forward = vec![vec![1, 2], vec![3], vec![3], vec![]];
        assert!(cycles(&forward).is_empty());
    }
}
