//! A process body's Markdown as HTML that is safe to put in a page: raw HTML shown as text,
//! links only to web or mail addresses, images as links, headings moved below the page's own.

use pulldown_cmark::{CowStr, Event, HeadingLevel, Options, Parser, Tag, TagEnd, html};

/// `markdown` as HTML. Raw HTML in it is escaped, never passed through; a link or image whose
/// address is not http(s), mailto or relative becomes its text; headings start at `<h3>` (the
/// body sits under the page's `<h1>` and a section's `<h2>`).
pub fn to_safe_html(markdown: &str) -> String {
    let mut sanitizer = Sanitizer::default();
    let events = Parser::new_ext(markdown, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH)
        .filter_map(|event| sanitizer.safe_event(event))
        .map(shift_heading);
    let mut out = String::new();
    html::push_html(&mut out, events);
    out
}

/// Makes events safe, one at a time: raw HTML as text; images as links (pages load no image
/// from elsewhere); links to unsafe addresses dropped, their text kept.
#[derive(Default)]
struct Sanitizer {
    /// For each link or image open now, whether its start was dropped (so its end is too).
    dropped: Vec<bool>,
}

impl Sanitizer {
    fn safe_event<'a>(&mut self, event: Event<'a>) -> Option<Event<'a>> {
        match event {
            Event::Html(raw) | Event::InlineHtml(raw) => Some(Event::Text(raw)),
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. })
                if !safe_url(&dest_url) =>
            {
                self.dropped.push(true);
                None
            }
            Event::Start(Tag::Image {
                link_type,
                dest_url,
                title,
                id,
            }) => {
                self.dropped.push(false);
                Some(Event::Start(Tag::Link {
                    link_type,
                    dest_url,
                    title,
                    id,
                }))
            }
            Event::Start(link @ Tag::Link { .. }) => {
                self.dropped.push(false);
                Some(Event::Start(link))
            }
            Event::End(TagEnd::Link | TagEnd::Image) => {
                if self.dropped.pop().unwrap_or(false) {
                    None
                } else {
                    Some(Event::End(TagEnd::Link))
                }
            }
            other => Some(other),
        }
    }
}

/// Whether a link may point at `url`: the web, mail, or a place on this page or server.
fn safe_url(url: &CowStr<'_>) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    match lower.split_once(':') {
        Some((scheme, _)) if !scheme.contains('/') && !scheme.contains('#') && !scheme.contains('?') => {
            matches!(scheme, "http" | "https" | "mailto")
        }
        _ => true,
    }
}

/// Headings two levels down, `<h6>` at most.
fn shift_heading(event: Event<'_>) -> Event<'_> {
    match event {
        Event::Start(Tag::Heading {
            level,
            id,
            classes,
            attrs,
        }) => Event::Start(Tag::Heading {
            level: lower(level),
            id,
            classes,
            attrs,
        }),
        Event::End(TagEnd::Heading(level)) => Event::End(TagEnd::Heading(lower(level))),
        other => other,
    }
}

fn lower(level: HeadingLevel) -> HeadingLevel {
    match level {
        HeadingLevel::H1 => HeadingLevel::H3,
        HeadingLevel::H2 => HeadingLevel::H4,
        HeadingLevel::H3 => HeadingLevel::H5,
        _ => HeadingLevel::H6,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_is_shown_as_text() {
        let html = to_safe_html("Hello <script>alert(1)</script> and\n\n<div onclick=\"x()\">block</div>\n");
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<div"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{html}");
        assert!(html.contains("&lt;div onclick=\"x()\"&gt;"), "{html}");
    }

    #[test]
    fn only_safe_links_stay_links_and_images_become_links() {
        let html = to_safe_html(
            "[web](https://example.test/a) [bad](javascript:alert(1)) [here](#x) ![chart](https://img.test/c.png)",
        );
        assert!(
            html.contains("<a href=\"https://example.test/a\">web</a>"),
            "{html}"
        );
        assert!(!html.contains("javascript"), "{html}");
        assert!(html.contains(" bad "), "{html}");
        assert!(html.contains("<a href=\"#x\">here</a>"), "{html}");
        assert!(
            html.contains("<a href=\"https://img.test/c.png\">chart</a>"),
            "{html}"
        );
        assert!(!html.contains("<img"), "{html}");
    }

    #[test]
    fn headings_sit_below_the_page_headings() {
        let html = to_safe_html("# Title\n\n## Part\n\n#### Deep\n");
        assert!(
            html.contains("<h3>Title</h3>") && html.contains("<h4>Part</h4>"),
            "{html}"
        );
        assert!(html.contains("<h6>Deep</h6>"), "{html}");
    }
}
