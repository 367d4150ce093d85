//! Text without a font at hand: estimated widths, wrapping, cutting, and titles from ids.
//!
//! The map names no font file, so the viewer's sans-serif draws it. Widths are estimated per
//! character a little above common sans-serif advances (Helvetica, Arial, Roboto, Segoe UI),
//! so wrapped text stays inside its box whichever of them draws it.

/// The faces the map uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Face {
    Sans,
    SansBold,
    Mono,
}

/// The ellipsis that marks cut text.
const ELLIPSIS: char = '…';

/// The estimated width in pixels of `text` set in `face` at `size` pixels.
pub(crate) fn width(text: &str, size: f64, face: Face) -> f64 {
    text.chars().map(|c| advance(c, face)).sum::<f64>() * size
}

/// A character's advance in ems.
fn advance(c: char, face: Face) -> f64 {
    if is_wide(c) {
        return 1.05;
    }
    let sans = match c {
        'i' | 'j' | 'l' | '\'' | '|' | '.' | ',' | ':' | ';' | '!' | 'I' | '`' => 0.3,
        'f' | 't' | 'r' | ' ' | '(' | ')' | '[' | ']' | '{' | '}' | '-' | '/' | '"' => 0.38,
        'm' | 'w' | 'M' | 'W' | '@' | '%' => 0.92,
        'A'..='Z' => 0.72,
        c if c.is_ascii() => 0.6,
        _ => 0.68,
    };
    match face {
        Face::Sans => sans,
        Face::SansBold => sans * 1.1,
        Face::Mono => 0.62,
    }
}

/// East Asian wide characters and emoji take about a full em.
fn is_wide(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x115F | 0x2E80..=0xA4CF | 0xAC00..=0xD7A3 | 0xF900..=0xFAFF | 0xFE30..=0xFE4F
        | 0xFF00..=0xFF60 | 0xFFE0..=0xFFE6 | 0x1F300..=0x1FAFF | 0x20000..=0x3FFFD)
}

/// Collapses every run of whitespace (newlines included) to one space.
pub(crate) fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Wraps `text` (whitespace collapsed) into lines no wider than `max_width`, at most
/// `max_lines` of them; when it does not fit, the last line ends in an ellipsis. A word wider
/// than a line is broken between characters.
pub(crate) fn wrap(text: &str, max_width: f64, size: f64, face: Face, max_lines: usize) -> Vec<String> {
    let fits = |s: &str| width(s, size, face) <= max_width;
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let candidate = if line.is_empty() {
            word.to_string()
        } else {
            format!("{line} {word}")
        };
        if fits(&candidate) {
            line = candidate;
            continue;
        }
        if !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        // The word alone: break it between characters when even that does not fit.
        for c in word.chars() {
            line.push(c);
            if !fits(&line) {
                line.pop();
                lines.push(std::mem::take(&mut line));
                line.push(c);
            }
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    if lines.len() > max_lines {
        lines.truncate(max_lines);
        if let Some(last) = lines.last_mut() {
            *last = with_ellipsis(last, max_width, size, face);
        }
    }
    lines
}

/// `text` on one line no wider than `max_width`, cut with an ellipsis when it does not fit.
pub(crate) fn fit(text: &str, max_width: f64, size: f64, face: Face) -> String {
    let text = collapse(text);
    if width(&text, size, face) <= max_width {
        text
    } else {
        with_ellipsis(&text, max_width, size, face)
    }
}

/// `text` shortened until it fits with an ellipsis after it.
fn with_ellipsis(text: &str, max_width: f64, size: f64, face: Face) -> String {
    let mut kept: String = text.to_string();
    loop {
        let candidate = format!("{}{ELLIPSIS}", kept.trim_end());
        if width(&candidate, size, face) <= max_width || kept.is_empty() {
            return candidate;
        }
        kept.pop();
    }
}

/// A step id or field name as a title, as the authoring guide reads ids: `check_vendor`
/// becomes `Check vendor`, `hiringManager` becomes `Hiring manager`.
pub(crate) fn humanize(id: &str) -> String {
    let mut words = String::new();
    let mut previous_lower = false;
    for c in id.chars() {
        if c == '_' || c == '-' || c == '.' {
            words.push(' ');
            previous_lower = false;
        } else if c.is_ascii_uppercase() && previous_lower {
            words.push(' ');
            words.push(c.to_ascii_lowercase());
            previous_lower = false;
        } else {
            words.push(c);
            previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        }
    }
    let words = collapse(&words);
    let mut chars = words.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => words,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_as_titles() {
        assert_eq!(humanize("check_vendor"), "Check vendor");
        assert_eq!(humanize("finance-approver"), "Finance approver");
        assert_eq!(humanize("hiringManager"), "Hiring manager");
        assert_eq!(humanize("cfo"), "Cfo");
    }

    #[test]
    fn wrapping_keeps_every_line_inside_and_marks_a_cut() {
        let text = "Check the vendor against the OFAC and EU sanctions lists and attach the report.";
        let lines = wrap(text, 120.0, 12.0, Face::Sans, 2);
        assert_eq!(lines.len(), 2);
        assert!(
            lines.iter().all(|l| width(l, 12.0, Face::Sans) <= 120.0),
            "{lines:?}"
        );
        assert!(lines[1].ends_with(ELLIPSIS), "{lines:?}");
        let all = wrap(text, 120.0, 12.0, Face::Sans, 20);
        assert_eq!(all.join(" "), text, "nothing is lost when there is room");
    }

    #[test]
    fn a_word_wider_than_the_line_is_broken() {
        let lines = wrap(&"x".repeat(100), 60.0, 12.0, Face::Mono, 20);
        assert!(lines.len() > 1);
        assert_eq!(lines.concat(), "x".repeat(100));
        assert!(lines.iter().all(|l| width(l, 12.0, Face::Mono) <= 60.0));
    }

    #[test]
    fn fit_cuts_one_line() {
        assert_eq!(fit("short", 200.0, 12.0, Face::Sans), "short");
        let cut = fit(&"word ".repeat(50), 100.0, 12.0, Face::Sans);
        assert!(cut.ends_with(ELLIPSIS));
        assert!(width(&cut, 12.0, Face::Sans) <= 100.0);
    }
}
