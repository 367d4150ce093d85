//! Who is signed in to a page: their identity and their session's CSRF token.

use agentprocess_gateway::auth::{Identity, IdentityKind};

/// A signed-in caller of a page: who they are, and the session's CSRF token for the forms the
/// page shows. Taken from the session cookie ([`crate::session`]); a request without a valid one is
/// sent to sign in (and comes back to the page it asked for, if that was a GET).
#[derive(Debug, Clone)]
pub struct SignedIn {
    pub identity: Identity,
    csrf: String,
}

impl SignedIn {
    /// The caller `identity`, whose session's forms carry `csrf`.
    pub(crate) fn new(identity: Identity, csrf: String) -> SignedIn {
        SignedIn { identity, csrf }
    }

    /// The CSRF token of this session, for the forms of the page.
    pub fn csrf(&self) -> &str {
        &self.csrf
    }

    /// Who this is, in a few words: the person's email or the agent's id, and the organization.
    pub fn identity_label(&self) -> String {
        let who = match &self.identity.kind {
            IdentityKind::Person { email, .. } => email.clone(),
            IdentityKind::Agent { id } => format!("agent {id}"),
        };
        format!("{who} · {}", self.identity.organization)
    }
}
