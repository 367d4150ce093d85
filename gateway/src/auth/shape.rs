//! The shape of a bearer JWT (RFC 7519 §7.2, RFC 7515 §7.2.1), checked before any key is looked
//! up, so that a token that is not a JWT at all is refused in words a person can act on.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::Algorithm;
use serde_json::{Map, Value};
use std::fmt;
use std::str::FromStr;

/// A part of a compact JWS: `header.claims.signature`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Header,
    Claims,
    Signature,
}

impl Part {
    fn describe(self) -> &'static str {
        match self {
            Part::Header => "its header (the first part)",
            Part::Claims => "its claims (the second part)",
            Part::Signature => "its signature (the third part)",
        }
    }
}

/// Why a bearer token is not a signed JWT. The messages never quote the token: a malformed
/// token is the caller's text, not the issuer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// Not three dot-separated parts; `parts` is how many there were.
    NotThreeParts { parts: usize },
    /// A part holds characters outside the base64url alphabet, or padding.
    NotBase64Url(Part),
    /// The header or the claims decode, but not to a JSON object.
    NotJsonObject(Part),
    /// The header names no `alg`.
    NoAlgorithm,
    /// The header names `alg: none`: an unsigned token.
    Unsigned,
    /// The header names an `alg` that is not a JWS signing algorithm.
    UnknownAlgorithm,
    /// The third part is empty.
    NoSignature,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Malformed::NotThreeParts { parts } => write!(
                f,
                "the bearer token is not a JWT: expected three base64url parts separated by dots, \
                 found {parts}"
            ),
            Malformed::NotBase64Url(part) => write!(
                f,
                "the bearer token is not a JWT: {} is not base64url (letters, digits, '-' and '_', \
                 no padding)",
                part.describe()
            ),
            Malformed::NotJsonObject(part) => write!(
                f,
                "the bearer token is not a JWT: {} does not decode to a JSON object",
                part.describe()
            ),
            Malformed::NoAlgorithm => f.write_str(
                "the bearer token's header names no signing algorithm (alg), so it cannot be verified",
            ),
            Malformed::Unsigned => f.write_str(
                "the bearer token is unsigned (alg \"none\"): this server accepts signed tokens only",
            ),
            Malformed::UnknownAlgorithm => f.write_str(
                "the bearer token's header names an algorithm (alg) that is not a JWS signing \
                 algorithm, such as RS256 or ES256",
            ),
            Malformed::NoSignature => {
                f.write_str("the bearer token has no signature: its third part is empty")
            }
        }
    }
}

/// What is wrong with the shape of `token`, or `None` when it is a compact JWS whose header
/// names a signing algorithm; whether it verifies is another matter.
pub fn malformed(token: &str) -> Option<Malformed> {
    let parts: Vec<&str> = token.split('.').collect();
    let [header, claims, signature] = parts[..] else {
        return Some(Malformed::NotThreeParts { parts: parts.len() });
    };
    let header = match json_object(header, Part::Header) {
        Ok(header) => header,
        Err(malformed) => return Some(malformed),
    };
    match header.get("alg").and_then(Value::as_str) {
        None => return Some(Malformed::NoAlgorithm),
        Some("none") => return Some(Malformed::Unsigned),
        Some(alg) if Algorithm::from_str(alg).is_err() => return Some(Malformed::UnknownAlgorithm),
        Some(_) => {}
    }
    if let Err(malformed) = json_object(claims, Part::Claims) {
        return Some(malformed);
    }
    if signature.is_empty() {
        return Some(Malformed::NoSignature);
    }
    if URL_SAFE_NO_PAD.decode(signature).is_err() {
        return Some(Malformed::NotBase64Url(Part::Signature));
    }
    None
}

/// `part` (the header or the claims) decoded from base64url and read as a JSON object.
fn json_object(part: &str, which: Part) -> Result<Map<String, Value>, Malformed> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| Malformed::NotBase64Url(which))?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(object)) => Ok(object),
        _ => Err(Malformed::NotJsonObject(which)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(text: &str) -> String {
        URL_SAFE_NO_PAD.encode(text)
    }

    fn token(header: &str, claims: &str, signature: &str) -> String {
        format!("{}.{}.{signature}", encode(header), encode(claims))
    }

    const HEADER: &str = r#"{"alg":"RS256","typ":"JWT"}"#;
    const CLAIMS: &str = r#"{"sub":"a"}"#;

    #[test]
    fn a_compact_jws_with_a_signing_algorithm_has_the_shape_of_a_jwt() {
        assert_eq!(malformed(&token(HEADER, CLAIMS, "c2ln")), None);
    }

    #[test]
    fn each_kind_of_malformed_token_is_named() {
        let cases = [
            ("not-a-jwt".to_owned(), Malformed::NotThreeParts { parts: 1 }),
            ("a.b".to_owned(), Malformed::NotThreeParts { parts: 2 }),
            ("a.b.c.d.e".to_owned(), Malformed::NotThreeParts { parts: 5 }),
            ("!!.e30.c2ln".to_owned(), Malformed::NotBase64Url(Part::Header)),
            (
                format!("{}.***.c2ln", encode(HEADER)),
                Malformed::NotBase64Url(Part::Claims),
            ),
            (
                token(HEADER, CLAIMS, "c2ln=="),
                Malformed::NotBase64Url(Part::Signature),
            ),
            (
                token("[1]", CLAIMS, "c2ln"),
                Malformed::NotJsonObject(Part::Header),
            ),
            (
                token(HEADER, "\"text\"", "c2ln"),
                Malformed::NotJsonObject(Part::Claims),
            ),
            (token(r#"{"typ":"JWT"}"#, CLAIMS, "c2ln"), Malformed::NoAlgorithm),
            (token(r#"{"alg":"none"}"#, CLAIMS, ""), Malformed::Unsigned),
            (
                token(r#"{"alg":"XS999"}"#, CLAIMS, "c2ln"),
                Malformed::UnknownAlgorithm,
            ),
            (token(HEADER, CLAIMS, ""), Malformed::NoSignature),
        ];
        for (token, expected) in cases {
            assert_eq!(malformed(&token), Some(expected), "{token}");
        }
    }

    #[test]
    fn messages_speak_to_a_person_and_never_quote_the_token() {
        let message = Malformed::NotThreeParts { parts: 1 }.to_string();
        assert_eq!(
            message,
            "the bearer token is not a JWT: expected three base64url parts separated by dots, found 1"
        );
        let secret_looking = token(r#"{"alg":"XS999-secret"}"#, CLAIMS, "c2ln");
        let message = malformed(&secret_looking).unwrap().to_string();
        assert!(!message.contains("XS999"), "{message}");
    }
}
