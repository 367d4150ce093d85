//! Where in a PROCESS.md an issue is: the file line its message names, or the line of the YAML
//! node its path names, so that an editor can show each issue next to its line.

use crate::issue::{self, Issue};
use crate::parse::{file_line, split};
use saphyr_parser::{Event, Parser};

/// The line of `source` (1-based; the opening `---` is line 1) that `issue` is about: the line
/// its message names when the parser raised it (`(line 7)`, `frontmatter line 7 column 3`), else
/// the line of the node its path names, or of the nearest enclosing node the source has (a
/// `missing` field points at its step). `None` when the issue is about the whole document.
pub fn issue_line(source: &str, issue: &Issue) -> Option<usize> {
    line_in_message(&issue.message).or_else(|| path_line(source, &issue.path))
}

/// The number after the first word `line ` in `message`, if any.
fn line_in_message(message: &str) -> Option<usize> {
    message.match_indices("line ").find_map(|(at, word)| {
        let starts_a_word = !message[..at].ends_with(|c: char| c.is_alphanumeric());
        let digits: String = message[at + word.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if starts_a_word { digits.parse().ok() } else { None }
    })
}

/// The file line of the node at `path` (`steps[2].next`), or of the deepest node on the way to
/// it that `source` has; `None` for the empty path or a frontmatter that cannot be read up to it.
pub fn path_line(source: &str, path: &str) -> Option<usize> {
    if path.is_empty() {
        return None;
    }
    let text = source.strip_prefix('\u{feff}').unwrap_or(source);
    let frontmatter = split(text).ok()?.frontmatter;
    let mut walker = Walker {
        target: path,
        stack: Vec::new(),
        best: None,
    };
    for event in Parser::new_from_str(frontmatter) {
        let Ok((event, span)) = event else { break };
        walker.on_event(event, file_line(span.start.line()));
    }
    walker.best.map(|(_, line)| line)
}

/// A list or mapping being walked, with its path.
#[derive(Debug)]
enum Frame {
    List {
        path: String,
        next_index: usize,
    },
    /// `key` holds a key read whose value has not ended yet.
    Mapping {
        path: String,
        key: Option<String>,
    },
}

/// Follows parser events, keeping the line of the longest path that leads to `target`.
#[derive(Debug)]
struct Walker<'a> {
    target: &'a str,
    stack: Vec<Frame>,
    /// The length of the best path so far, and its line.
    best: Option<(usize, usize)>,
}

impl Walker<'_> {
    fn on_event(&mut self, event: Event<'_>, line: usize) {
        match event {
            Event::Scalar(text, ..) => {
                if let Some(Frame::Mapping {
                    path,
                    key: key @ None,
                }) = self.stack.last_mut()
                {
                    let key_path = issue::child(path, &text);
                    *key = Some(text.into_owned());
                    self.consider(&key_path, line);
                } else {
                    self.value_path(line);
                    self.value_ended();
                }
            }
            Event::Alias(_) => {
                self.value_path(line);
                self.value_ended();
            }
            Event::SequenceStart(..) => {
                let path = self.value_path(line);
                self.stack.push(Frame::List { path, next_index: 0 });
            }
            Event::MappingStart(..) => {
                let path = self.value_path(line);
                self.stack.push(Frame::Mapping { path, key: None });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                self.stack.pop();
                self.value_ended();
            }
            _ => {}
        }
    }

    /// The path of a value starting on `line`. A list item is placed here; a mapping value was
    /// placed with its key.
    fn value_path(&mut self, line: usize) -> String {
        match self.stack.last_mut() {
            None => String::new(),
            Some(Frame::List { path, next_index }) => {
                let item = issue::index(path, *next_index);
                *next_index += 1;
                self.consider(&item, line);
                item
            }
            Some(Frame::Mapping { path, key }) => issue::child(path, key.as_deref().unwrap_or_default()),
        }
    }

    /// After a value: its mapping waits for the next key.
    fn value_ended(&mut self) {
        if let Some(Frame::Mapping { key, .. }) = self.stack.last_mut() {
            *key = None;
        }
    }

    fn consider(&mut self, path: &str, line: usize) {
        let leads_to_target = self.target == path
            || self
                .target
                .strip_prefix(path)
                .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['));
        if leads_to_target && self.best.is_none_or(|(length, _)| path.len() > length) {
            self.best = Some((path.len(), line));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "---
name: expense
description: Pay back an expense.
inputs:
  amount: number
steps:
  - id: submit
    agent: Collect the receipt.
    next: review
  - id: review
    person: approver
    approve: Approve it.
    next: nowhere
---

# Expense
";

    #[test]
    fn a_path_is_found_at_its_key_or_list_item() {
        assert_eq!(path_line(SOURCE, "name"), Some(2));
        assert_eq!(path_line(SOURCE, "inputs.amount"), Some(5));
        assert_eq!(path_line(SOURCE, "steps"), Some(6));
        assert_eq!(path_line(SOURCE, "steps[1]"), Some(10));
        assert_eq!(path_line(SOURCE, "steps[1].next"), Some(13));
        assert_eq!(path_line(SOURCE, "steps[0].next"), Some(9));
    }

    #[test]
    fn a_missing_node_points_at_the_nearest_one_that_is_there() {
        assert_eq!(path_line(SOURCE, "steps[1].due"), Some(10));
        assert_eq!(path_line(SOURCE, "steps[5].id"), Some(6));
        assert_eq!(path_line(SOURCE, "inputsx"), None);
        assert_eq!(path_line(SOURCE, ""), None);
        assert_eq!(path_line("no frontmatter", "name"), None);
    }

    #[test]
    fn a_line_the_parser_names_wins() {
        let duplicate = Issue::new("steps[0]", "duplicate key \"id\" (line 8)");
        assert_eq!(issue_line(SOURCE, &duplicate), Some(8));
        let syntax = Issue::new("", "frontmatter line 4 column 3: did not find expected key");
        assert_eq!(issue_line(SOURCE, &syntax), Some(4));
        let outline = Issue::new("steps[1].next", "the outline 3 is not a step");
        assert_eq!(issue_line(SOURCE, &outline), Some(13));
        assert_eq!(issue_line(SOURCE, &Issue::new("", "the document is empty")), None);
    }

    #[test]
    fn the_lines_of_real_validation_issues_are_found() {
        let issues = crate::load(SOURCE.as_bytes(), &crate::Offer::EVERYTHING).unwrap_err();
        let lines: Vec<Option<usize>> = issues.iter().map(|issue| issue_line(SOURCE, issue)).collect();
        assert!(lines.contains(&Some(13)), "{issues:?} at {lines:?}");
    }
}
