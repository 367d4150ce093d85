//! The pages' frame: one layout (skip link, landmarks, who is signed in), the embedded assets,
//! and the headers every page is sent with.

use super::signed_in::SignedIn;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

/// The stylesheet, embedded in the binary: the frame's rules, then each area's.
pub const STYLESHEET: &str = concat!(
    include_str!("assets/style.css"),
    include_str!("assets/work.css"),
    include_str!("assets/runs.css"),
    include_str!("assets/processes.css"),
    include_str!("assets/overview.css"),
);
/// The icon, embedded in the binary.
pub const ICON: &str = include_str!("assets/icon.svg");
/// Where the stylesheet is served. The name carries a version, so it can be cached for good.
pub const STYLESHEET_PATH: &str = "/ui/assets/style-3.css";
/// Where the icon is served.
pub const ICON_PATH: &str = "/ui/assets/icon-1.svg";

/// Pages load nothing but this server's own stylesheet and icon, run no script, and are never
/// framed.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
     base-uri 'none'; frame-ancestors 'none'";

/// A whole page: its title, who is signed in (for the header), and its main content.
#[derive(Debug)]
pub struct Page<'a> {
    pub title: &'a str,
    pub signed_in: Option<&'a SignedIn>,
    pub main: Markup,
}

impl Page<'_> {
    /// As [`Page::render`], for a page that reloads itself every `seconds`, with no script: a
    /// `Refresh` header, which browsers treat as `<meta http-equiv="refresh">` does. The page
    /// must say so and offer a way to turn it off (WCAG 2.2.1, which axe-core's `meta-refresh`
    /// rule checks for the meta element).
    pub fn render_refreshing(self, status: StatusCode, seconds: u32) -> Response {
        let mut response = self.render(status);
        response
            .headers_mut()
            .insert(header::REFRESH, HeaderValue::from(seconds));
        response
    }

    /// The page as HTML, with the status given.
    pub fn render(self, status: StatusCode) -> Response {
        let markup = html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { (self.title) " · agentprocess" }
                    link rel="icon" href=(ICON_PATH) type="image/svg+xml";
                    link rel="stylesheet" href=(STYLESHEET_PATH);
                }
                body {
                    a class="skip-link" href="#main" { "Skip to main content" }
                    header class="site-header" {
                        a class="brand" href="/ui" { "agentprocess" }
                        @if let Some(signed_in) = self.signed_in {
                            div class="account" {
                                span class="who" { (signed_in.identity_label()) }
                                form method="post" action="/ui/sign-out" {
                                    input type="hidden" name="csrf" value=(signed_in.csrf());
                                    button type="submit" class="link-button" { "Sign out" }
                                }
                            }
                        }
                    }
                    @if let Some(signed_in) = self.signed_in {
                        nav class="site-nav" aria-label="Main" {
                            ul {
                                @for (label, href) in nav_links(signed_in) {
                                    li { a href=(href) { (label) } }
                                }
                            }
                        }
                    }
                    main id="main" tabindex="-1" {
                        (self.main)
                    }
                    footer class="site-footer" {
                        p { "agentprocess " (env!("CARGO_PKG_VERSION")) }
                    }
                }
            }
        };
        html_response(status, markup.into_string())
    }
}

/// Text safe as one segment of a path: ids and names are plain (`r_…`, `purchase-request`);
/// anything else is percent-encoded.
pub fn path_segment(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The path of a run's page.
pub fn run_path(run_id: &str) -> String {
    format!("/ui/runs/{}", path_segment(run_id))
}

/// The main navigation: everyone's pages, then the operators'.
fn nav_links(signed_in: &SignedIn) -> Vec<(&'static str, &'static str)> {
    let mut links = vec![("Inbox", "/ui"), ("Runs", "/ui/runs")];
    if signed_in.identity.operator {
        links.extend([
            ("Overview", "/ui/overview"),
            ("Escalations", "/ui/escalations"),
            ("Processes", "/ui/processes"),
            ("Trust", "/ui/trust"),
            ("Webhooks", "/ui/webhooks"),
        ]);
    }
    links
}

/// HTML with the headers every page carries: the content security policy, no caching (pages
/// show who is signed in), and no referrer beyond this origin.
pub fn html_response(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// A page that says what went wrong and what to do, with the status given.
pub fn message_page(
    status: StatusCode,
    title: &str,
    message: &str,
    signed_in: Option<&SignedIn>,
) -> Response {
    Page {
        title,
        signed_in,
        main: html! {
            h1 { (title) }
            p { (message) }
            p { a href="/ui" { "Go to the start page" } }
        },
    }
    .render(status)
}

/// An embedded asset, cached for a year (its path changes when it does).
pub fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}
