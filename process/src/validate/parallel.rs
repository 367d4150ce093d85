//! The branch rules of the parallel-1 profile (§2): what a branch is, and how it may route.

use super::graph::{EdgeKind, Goal, Shape};
use super::text::quote;
use crate::issue::{Issue, index};
use std::collections::HashMap;

/// Finds every branch and reports every broken branch rule. Returns, for each step, the
/// position of the entry of the branch it belongs to (`None` outside every branch).
///
/// A branch is its entry plus every step reached from it along `next` and `on_timeout`,
/// stopping at `join`. Steps "outside" are those reached from the first step without passing
/// a `parallel:` edge; a branch that reaches one of them has routed out of its branch.
pub(super) fn branches(
    shapes: &[Shape],
    all_edges_read: bool,
    issues: &mut Vec<Issue>,
) -> Vec<Option<usize>> {
    let count = shapes.len();
    let mut branch_of: Vec<Option<usize>> = vec![None; count];
    let parallels: Vec<usize> = (0..count).filter(|&p| shapes[p].kind == "parallel").collect();
    if parallels.is_empty() {
        return branch_of;
    }
    let name = |position: usize| quote(&shapes[position].id);
    let steps_path = |position: usize| index("steps", position);

    let mut is_entry = vec![false; count];
    for &p in &parallels {
        for edge in shapes[p].edges.iter().filter(|e| e.kind == EdgeKind::Branch) {
            if let Goal::Step(entry) = edge.to {
                is_entry[entry] = true;
            }
        }
    }
    let mut outside = vec![false; count];
    if count > 0 {
        outside[0] = true;
        let mut queue = vec![0];
        while let Some(from) = queue.pop() {
            for edge in shapes[from].edges.iter().filter(|e| e.kind.goes_forward()) {
                if let Goal::Step(to) = edge.to
                    && !outside[to]
                    && !is_entry[to]
                {
                    outside[to] = true;
                    queue.push(to);
                }
            }
        }
    }

    let mut parallel_of: Vec<Option<usize>> = vec![None; count];
    let mut flagged = vec![false; count];
    let mut shared_reported = vec![false; count];
    let mut found: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut shared = |step: usize, first: usize, second: usize, issues: &mut Vec<Issue>| {
        if !shared_reported[step] {
            shared_reported[step] = true;
            issues.push(Issue::new(
                steps_path(step),
                format!("in two branches, of {} and of {}", name(first), name(second)),
            ));
        }
    };
    for &p in &parallels {
        for edge in shapes[p].edges.iter().filter(|e| e.kind == EdgeKind::Branch) {
            let Goal::Step(entry) = edge.to else { continue };
            let problem = if shapes[entry].kind == "finish" {
                Some(format!(
                    "{} is a finish; a branch cannot contain one",
                    name(entry)
                ))
            } else if shapes[entry].kind == "parallel" {
                Some(format!(
                    "{} is a parallel step; a branch cannot contain one (no nesting in parallel-1)",
                    name(entry)
                ))
            } else if outside[entry] {
                Some(format!(
                    "{} is the first step; a branch entry is reached only through its parallel step",
                    name(entry)
                ))
            } else {
                None
            };
            if let Some(problem) = problem {
                issues.push(Issue::new(&edge.path, problem));
                continue;
            }
            if let Some(other) = branch_of[entry] {
                shared(entry, other, entry, issues);
                continue;
            }
            branch_of[entry] = Some(entry);
            parallel_of[entry] = Some(p);
            let mut members = vec![entry];
            let mut next_member = 0;
            while let Some(&member) = members.get(next_member) {
                next_member += 1;
                if !shapes[member].declared_next {
                    flagged[member] = true;
                    issues.push(Issue::new(
                        steps_path(member),
                        "a step in a branch names next explicitly; next: join ends the branch",
                    ));
                }
                for edge in shapes[member]
                    .edges
                    .iter()
                    .filter(|e| matches!(e.kind, EdgeKind::Next | EdgeKind::OnTimeout))
                {
                    let Goal::Step(to) = edge.to else { continue };
                    let problem = if shapes[to].kind == "finish" {
                        Some(format!(
                            "{} is a finish; a branch step cannot route to one",
                            name(to)
                        ))
                    } else if to == p {
                        Some(format!(
                            "a branch step cannot route to its parallel step {}",
                            name(p)
                        ))
                    } else if shapes[to].kind == "parallel" {
                        Some(format!(
                            "{} is a parallel step; a branch cannot contain one (no nesting in parallel-1)",
                            name(to)
                        ))
                    } else if outside[to] {
                        Some(format!(
                            "{} is outside the branch; a branch step routes only within its branch or to join",
                            name(to)
                        ))
                    } else {
                        None
                    };
                    if let Some(problem) = problem {
                        flagged[member] = true;
                        issues.push(Issue::new(&edge.path, problem));
                        continue;
                    }
                    match branch_of[to] {
                        None => {
                            branch_of[to] = Some(entry);
                            parallel_of[to] = Some(p);
                            members.push(to);
                        }
                        Some(owner) if owner == entry => {}
                        Some(other) => {
                            flagged[member] = true;
                            shared(to, other, entry, issues);
                        }
                    }
                }
            }
            found.push((entry, members));
        }
    }

    if all_edges_read {
        for (entry, members) in &found {
            // Walk the branch's edges backwards from every step that names join.
            let mut leads_here: HashMap<usize, Vec<usize>> = HashMap::new();
            let mut reaches = vec![false; count];
            let mut queue = Vec::new();
            for &member in members {
                for edge in shapes[member]
                    .edges
                    .iter()
                    .filter(|e| matches!(e.kind, EdgeKind::Next | EdgeKind::OnTimeout))
                {
                    match edge.to {
                        Goal::Join if !reaches[member] => {
                            reaches[member] = true;
                            queue.push(member);
                        }
                        Goal::Join => {}
                        Goal::Step(to) => leads_here.entry(to).or_default().push(member),
                    }
                }
            }
            while let Some(reached) = queue.pop() {
                for &from in leads_here.get(&reached).into_iter().flatten() {
                    if !reaches[from] && branch_of[from] == Some(*entry) {
                        reaches[from] = true;
                        queue.push(from);
                    }
                }
            }
            let mut stuck: Vec<usize> = members
                .iter()
                .copied()
                .filter(|&m| !reaches[m] && !flagged[m])
                .collect();
            stuck.sort_unstable();
            for member in stuck {
                issues.push(Issue::new(steps_path(member), "does not reach join"));
            }
        }
    }

    for (from, shape) in shapes.iter().enumerate() {
        for edge in &shape.edges {
            let into = match edge.to {
                Goal::Step(to) => branch_of[to].map(|_| to),
                Goal::Join => None,
            };
            match (edge.kind, branch_of[from]) {
                (EdgeKind::Branch, _) => {}
                (EdgeKind::OnReject, Some(own)) => {
                    if let Goal::Step(to) = edge.to
                        && branch_of[to] != Some(own)
                    {
                        issues.push(Issue::new(
                            &edge.path,
                            format!(
                                "{} is outside this branch; on_reject inside a branch returns within it",
                                name(to)
                            ),
                        ));
                    }
                }
                (EdgeKind::OnReject, None) => {
                    if let Some(to) = into {
                        issues.push(Issue::new(
                            &edge.path,
                            format!(
                                "{} is inside a branch of {}; return to the parallel step to run every branch again",
                                name(to),
                                name(parallel_of[to].unwrap_or(to))
                            ),
                        ));
                    }
                }
                (_, Some(_)) => {}
                (kind, None) => {
                    if edge.to == Goal::Join {
                        // Which steps are in a branch is only known when every edge was read.
                        if all_edges_read {
                            issues.push(Issue::new(&edge.path, "join is allowed only inside a branch"));
                        }
                    } else if let Some(to) = into {
                        let parallel = name(parallel_of[to].unwrap_or(to));
                        let message = if kind == EdgeKind::Default {
                            format!(
                                "goes on by default to {}, which is inside a branch of {parallel}; name next explicitly",
                                name(to)
                            )
                        } else {
                            format!(
                                "{} is inside a branch of {parallel}; only its parallel step starts a branch",
                                name(to)
                            )
                        };
                        issues.push(Issue::new(&edge.path, message));
                    }
                }
            }
        }
    }
    branch_of
}
