//! What changed between two texts of a process (two versions, or a version and the draft): a
//! line diff as hunks with three lines of context, and the same as a unified diff.

use serde::Serialize;
use similar::{ChangeTag, TextDiff};

/// Lines of unchanged context around each change.
const CONTEXT_LINES: usize = 3;

/// The difference between an old and a new text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceDiff {
    pub identical: bool,
    /// Lines added and removed in all.
    pub added: usize,
    pub removed: usize,
    pub hunks: Vec<Hunk>,
    /// The whole diff in unified format, headed `--- old_label` / `+++ new_label`.
    pub unified: String,
}

/// A run of changes with its context. Line numbers start at 1, as a reader counts them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hunk {
    pub old_start: usize,
    pub old_lines: usize,
    pub new_start: usize,
    pub new_lines: usize,
    pub lines: Vec<DiffLine>,
}

/// One line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffLine {
    pub op: LineOp,
    /// The line without its line break.
    pub text: String,
    /// Where the line is in the old text (`None` for an inserted line).
    pub old_line: Option<usize>,
    /// Where the line is in the new text (`None` for a deleted line).
    pub new_line: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LineOp {
    Equal,
    Delete,
    Insert,
}

/// Diffs `old` against `new` line by line.
pub fn source_diff(old: &str, new: &str, old_label: &str, new_label: &str) -> SourceDiff {
    let diff = TextDiff::from_lines(old, new);
    let mut added = 0;
    let mut removed = 0;
    let mut hunks = Vec::new();
    for group in diff.grouped_ops(CONTEXT_LINES) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let old_range = first.old_range().start..last.old_range().end;
        let new_range = first.new_range().start..last.new_range().end;
        let mut lines = Vec::new();
        for op in &group {
            for change in diff.iter_changes(op) {
                let op = match change.tag() {
                    ChangeTag::Equal => LineOp::Equal,
                    ChangeTag::Delete => {
                        removed += 1;
                        LineOp::Delete
                    }
                    ChangeTag::Insert => {
                        added += 1;
                        LineOp::Insert
                    }
                };
                let text = change.value();
                lines.push(DiffLine {
                    op,
                    text: text
                        .strip_suffix('\n')
                        .unwrap_or(text)
                        .trim_end_matches('\r')
                        .to_owned(),
                    old_line: change.old_index().map(|i| i + 1),
                    new_line: change.new_index().map(|i| i + 1),
                });
            }
        }
        hunks.push(Hunk {
            old_start: old_range.start + 1,
            old_lines: old_range.len(),
            new_start: new_range.start + 1,
            new_lines: new_range.len(),
            lines,
        });
    }
    let unified = if hunks.is_empty() {
        String::new()
    } else {
        diff.unified_diff()
            .context_radius(CONTEXT_LINES)
            .header(old_label, new_label)
            .to_string()
    };
    SourceDiff {
        identical: hunks.is_empty(),
        added,
        removed,
        hunks,
        unified,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_texts_have_no_hunks() {
        let diff = source_diff("a\nb\n", "a\nb\n", "v1", "v2");
        assert!(diff.identical);
        assert!(diff.hunks.is_empty());
        assert_eq!(diff.unified, "");
    }

    #[test]
    fn a_changed_line_is_one_hunk_with_its_context_and_line_numbers() {
        let old: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        let new = old.replace("line 5\n", "line five\n");
        let diff = source_diff(&old, &new, "v1", "draft");
        assert!(!diff.identical);
        assert_eq!((diff.added, diff.removed), (1, 1));
        assert_eq!(diff.hunks.len(), 1);
        let hunk = &diff.hunks[0];
        assert_eq!(
            (hunk.old_start, hunk.old_lines, hunk.new_start, hunk.new_lines),
            (2, 7, 2, 7)
        );
        let changed: Vec<(LineOp, &str, Option<usize>, Option<usize>)> = hunk
            .lines
            .iter()
            .filter(|line| line.op != LineOp::Equal)
            .map(|line| (line.op, line.text.as_str(), line.old_line, line.new_line))
            .collect();
        assert_eq!(
            changed,
            [
                (LineOp::Delete, "line 5", Some(5), None),
                (LineOp::Insert, "line five", None, Some(5)),
            ]
        );
        assert!(
            diff.unified.starts_with("--- v1\n+++ draft\n@@ -2,7 +2,7 @@\n"),
            "{}",
            diff.unified
        );
        assert!(
            diff.unified.contains("\n-line 5\n+line five\n"),
            "{}",
            diff.unified
        );
    }

    #[test]
    fn changes_far_apart_are_separate_hunks() {
        let old: String = (1..=30).map(|i| format!("{i}\n")).collect();
        let new = old
            .replace("\n2\n", "\ntwo\n")
            .replace("\n28\n", "\ntwenty-eight\n");
        let diff = source_diff(&old, &new, "v1", "v2");
        assert_eq!(diff.hunks.len(), 2);
        assert_eq!(diff.hunks[1].new_start, 25);
    }
}
