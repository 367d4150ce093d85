//! The signed-in start page: who you are. It becomes the inbox.

use super::layout::Page;
use super::session::SignedIn;
use crate::auth::IdentityKind;
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;

/// `GET /ui`: who the caller is signed in as.
pub async fn home(signed_in: SignedIn) -> Response {
    let identity = &signed_in.identity;
    let main = html! {
        h1 { "Signed in" }
        dl class="facts" {
            @match &identity.kind {
                IdentityKind::Person { email, groups } => {
                    dt { "Person" }
                    dd { (email) }
                    dt { "Groups" }
                    dd {
                        @if groups.is_empty() { "none" } @else { (groups.join(", ")) }
                    }
                }
                IdentityKind::Agent { id } => {
                    dt { "Agent" }
                    dd { (id) }
                }
            }
            dt { "Organization" }
            dd { (identity.organization) }
            dt { "Operator" }
            dd { @if identity.operator { "yes" } @else { "no" } }
        }
        div class="actions" {
            form method="post" action="/ui/sign-out" {
                input type="hidden" name="csrf" value=(signed_in.csrf());
                button type="submit" class="secondary" { "Sign out" }
            }
        }
    };
    Page {
        title: "Signed in",
        signed_in: Some(&signed_in),
        main,
    }
    .render(StatusCode::OK)
}
