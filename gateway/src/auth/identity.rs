//! Who is calling: the typed identity a verified token's claims give, and which claims give it.

use agentprocess_ids::OrgId;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The caller of a tool, as established by the gateway's authentication.
///
/// Built only from a token whose signature, issuer, audience and lifetime were verified. It is
/// what travels to the runtime; the token itself never leaves the gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The organization the caller acts in. Every run, process and work item belongs to one.
    pub organization: OrgId,
    /// An agent or a person.
    pub kind: IdentityKind,
    /// Whether the caller may act as an operator of the organization (cancel runs, send events).
    pub operator: bool,
}

/// An agent or a person. Only a person completes tasks, approvals and escalations (spec §6.4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum IdentityKind {
    /// A program that claims and submits agent steps.
    Agent { id: String },
    /// A human. `email` is the person value (`describe.person.format` is `email`); `groups` are
    /// the identity provider's group ids, which roles map to at import.
    Person { email: String, groups: Vec<String> },
}

impl Identity {
    pub fn is_person(&self) -> bool {
        matches!(self.kind, IdentityKind::Person { .. })
    }

    pub fn is_agent(&self) -> bool {
        matches!(self.kind, IdentityKind::Agent { .. })
    }
}

/// The value of the kind claim: which [`IdentityKind`] a token's other claims make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KindClaim {
    Agent,
    Person,
}

/// Which token claims give the identity. The defaults suit tokens minted by `agentprocess token`
/// and identity providers that can add custom claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClaimNames {
    /// The organization (a string). Default `org`.
    pub organization: String,
    /// `agent` or `person`. Default `kind`.
    pub kind: String,
    /// The agent's id (a string). Default `sub`.
    pub agent_id: String,
    /// The person's email (a string). Default `email`.
    pub email: String,
    /// The person's groups (a list of strings, or one string). Default `groups`.
    pub groups: String,
    /// Operator rights (`true`/`false`). Default `operator`.
    pub operator: String,
    /// The kind to assume when the kind claim is absent. Default none: such a token is refused,
    /// so that a token is never read as a person's by accident.
    pub default_kind: Option<KindClaim>,
    /// The organization to assume when the organization claim is absent (a provider that serves
    /// one organization). Default none: such a token is refused.
    pub default_organization: Option<String>,
}

impl Default for ClaimNames {
    fn default() -> Self {
        ClaimNames {
            organization: "org".into(),
            kind: "kind".into(),
            agent_id: "sub".into(),
            email: "email".into(),
            groups: "groups".into(),
            operator: "operator".into(),
            default_kind: None,
            default_organization: None,
        }
    }
}

/// A verified token whose claims do not make an identity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    #[error("the token has no {0:?} claim")]
    Missing(String),
    #[error("the token's {claim:?} claim is not {expected}")]
    Malformed { claim: String, expected: &'static str },
}

impl ClaimNames {
    /// Reads an identity from verified claims.
    pub fn identity(&self, claims: &Map<String, Value>) -> Result<Identity, ClaimError> {
        let organization = match self.optional_string(claims, &self.organization)? {
            Some(organization) => organization,
            None => self
                .default_organization
                .clone()
                .ok_or_else(|| ClaimError::Missing(self.organization.clone()))?,
        };
        let claimed = match self.optional_string(claims, &self.kind)?.as_deref() {
            Some("agent") => KindClaim::Agent,
            Some("person") => KindClaim::Person,
            Some(_) => {
                return Err(ClaimError::Malformed {
                    claim: self.kind.clone(),
                    expected: "\"agent\" or \"person\"",
                });
            }
            None => self
                .default_kind
                .ok_or_else(|| ClaimError::Missing(self.kind.clone()))?,
        };
        let kind = match claimed {
            KindClaim::Agent => IdentityKind::Agent {
                id: self.required_string(claims, &self.agent_id)?,
            },
            KindClaim::Person => IdentityKind::Person {
                email: self.required_string(claims, &self.email)?,
                groups: self.groups(claims)?,
            },
        };
        let operator = match claims.get(&self.operator) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(operator)) => *operator,
            Some(_) => {
                return Err(ClaimError::Malformed {
                    claim: self.operator.clone(),
                    expected: "a boolean",
                });
            }
        };
        Ok(Identity {
            organization: OrgId::from(organization),
            kind,
            operator,
        })
    }

    fn optional_string(
        &self,
        claims: &Map<String, Value>,
        claim: &str,
    ) -> Result<Option<String>, ClaimError> {
        match claims.get(claim) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(value)) if !value.is_empty() => Ok(Some(value.clone())),
            Some(_) => Err(ClaimError::Malformed {
                claim: claim.to_owned(),
                expected: "a non-empty string",
            }),
        }
    }

    fn required_string(&self, claims: &Map<String, Value>, claim: &str) -> Result<String, ClaimError> {
        self.optional_string(claims, claim)?
            .ok_or_else(|| ClaimError::Missing(claim.to_owned()))
    }

    fn groups(&self, claims: &Map<String, Value>) -> Result<Vec<String>, ClaimError> {
        let malformed = || ClaimError::Malformed {
            claim: self.groups.clone(),
            expected: "a list of strings",
        };
        match claims.get(&self.groups) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::String(group)) => Ok(vec![group.clone()]),
            Some(Value::Array(groups)) => groups
                .iter()
                .map(|group| group.as_str().map(str::to_owned).ok_or_else(malformed))
                .collect(),
            Some(_) => Err(malformed()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn an_agent_token() {
        let identity = ClaimNames::default()
            .identity(&claims(
                json!({ "org": "acme", "kind": "agent", "sub": "a_screener" }),
            ))
            .unwrap();
        assert_eq!(
            identity,
            Identity {
                organization: "acme".into(),
                kind: IdentityKind::Agent {
                    id: "a_screener".into()
                },
                operator: false,
            }
        );
    }

    #[test]
    fn a_person_token_with_groups_and_operator() {
        let identity = ClaimNames::default()
            .identity(&claims(json!({
                "org": "acme", "kind": "person", "sub": "u1", "email": "mira@acme.test",
                "groups": ["g_finance", "g_ops"], "operator": true
            })))
            .unwrap();
        assert_eq!(
            identity.kind,
            IdentityKind::Person {
                email: "mira@acme.test".into(),
                groups: vec!["g_finance".into(), "g_ops".into()],
            }
        );
        assert!(identity.operator);
    }

    #[test]
    fn refusals_name_the_claim() {
        let names = ClaimNames::default();
        assert_eq!(
            names.identity(&claims(json!({ "kind": "agent", "sub": "a" }))),
            Err(ClaimError::Missing("org".into()))
        );
        assert_eq!(
            names.identity(&claims(json!({ "org": "acme", "sub": "a" }))),
            Err(ClaimError::Missing("kind".into()))
        );
        assert_eq!(
            names.identity(&claims(json!({ "org": "acme", "kind": "person", "sub": "a" }))),
            Err(ClaimError::Missing("email".into()))
        );
        assert!(matches!(
            names.identity(&claims(json!({ "org": "acme", "kind": "robot", "sub": "a" }))),
            Err(ClaimError::Malformed { .. })
        ));
        assert!(matches!(
            names.identity(&claims(
                json!({ "org": "acme", "kind": "agent", "sub": "a", "operator": "yes" })
            )),
            Err(ClaimError::Malformed { .. })
        ));
    }

    #[test]
    fn configured_claim_names_and_defaults() {
        let names = ClaimNames {
            organization: "tenant".into(),
            email: "preferred_username".into(),
            default_kind: Some(KindClaim::Person),
            ..ClaimNames::default()
        };
        let identity = names
            .identity(&claims(
                json!({ "tenant": "acme", "preferred_username": "li@acme.test", "groups": "g_x" }),
            ))
            .unwrap();
        assert_eq!(identity.organization, "acme");
        assert_eq!(
            identity.kind,
            IdentityKind::Person {
                email: "li@acme.test".into(),
                groups: vec!["g_x".into()]
            }
        );
    }
}
