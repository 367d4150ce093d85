//! Sessions of the web UI: a cookie holding a bearer token, CSRF tokens bound to it, and the
//! extractors pages use to get the caller's [`Identity`].
//!
//! The session cookie carries an access token that the gateway's [`Authenticator`] verifies on
//! every request, exactly as it verifies MCP bearer tokens: a dev token minted at sign-in in dev
//! mode, the identity provider's access token otherwise. So any gateway of a cluster serves any
//! page with no session store, and a session ends when its token expires. Signing out clears the
//! cookie; the token itself stays valid until it expires (nothing is kept to revoke it).
//!
//! CSRF: every form carries a token that is the MAC, under the UI key, of the session's token
//! (signed-in forms) or of a random nonce kept in a sign-in cookie (the sign-in form, before
//! there is a session). A POST whose token does not match is refused with a 403 page.
//!
//! Flash: a notice for the next page of the same session only (what a form just did), in a
//! short-lived cookie signed under the UI key and bound to the session's token; the page that
//! shows it clears it, so a reload, a refresh or a link with a made-up query shows nothing.
//!
//! [`Authenticator`]: agentprocess_gateway::auth::Authenticator

use super::UiState;
use super::layout::message_page;
use super::signed_in::SignedIn;
use super::signing::UiKey;
use agentprocess_gateway::auth::AuthError;
use axum::extract::{FromRef, FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use std::time::Duration;

/// How long a dev session (and a dev token issued to an MCP client) lasts: twelve hours, as
/// `agentprocess token` mints by default.
pub const DEV_SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Where people sign in.
pub const SIGN_IN_PATH: &str = "/ui/sign-in";
/// Where a sign-in goes when it was not sent from a page.
pub const HOME_PATH: &str = "/ui";
/// The name of the form field that carries the CSRF token.
pub const CSRF_FIELD: &str = "csrf";
/// The largest form body a page takes.
const MAX_FORM_BYTES: usize = 64 * 1024;
/// The longest `next` kept: longer ones go to the home page instead. Room for an authorization
/// request, whose client id alone may take two kilobytes.
const MAX_NEXT_BYTES: usize = 8192;
/// The longest token a session cookie holds: browsers keep cookies of about 4 KiB, name and
/// attributes included.
pub const MAX_SESSION_TOKEN_BYTES: usize = 3900;
/// How long the sign-in cookie (CSRF nonce, provider sign-in state) lives: ten minutes.
pub const SIGN_IN_COOKIE_SECONDS: u64 = 600;
/// How long a flash waits for its page: a minute (the redirect that shows it follows at once).
pub const FLASH_COOKIE_SECONDS: u64 = 60;
/// The purpose flashes are signed for.
const FLASH_PURPOSE: &str = "flash";
/// The purpose of the MAC that binds a flash to its session's token.
const FLASH_SESSION_PURPOSE: &str = "flash session";
/// Bytes of that MAC, in front of the notice in a flash.
const FLASH_BINDING_BYTES: usize = 32;

/// The cookie names of a deployment. Over https they take the `__Host-` prefix, which browsers
/// accept only with `Secure`, `Path=/` and no `Domain`, so no other host can set them.
#[derive(Debug, Clone)]
pub struct Cookies {
    pub secure: bool,
    pub session: &'static str,
    pub sign_in: &'static str,
    /// The one-time notice for the next page (see the module's docs).
    pub flash: &'static str,
}

impl Cookies {
    /// The cookies for a server whose public URL is https (`secure`) or not.
    pub fn new(secure: bool) -> Cookies {
        if secure {
            Cookies {
                secure,
                session: "__Host-ap_session",
                sign_in: "__Host-ap_sign_in",
                flash: "__Host-ap_flash",
            }
        } else {
            Cookies {
                secure,
                session: "ap_session",
                sign_in: "ap_sign_in",
                flash: "ap_flash",
            }
        }
    }

    /// A `Set-Cookie` value: HttpOnly, SameSite=Lax, Path=/, Secure over https, living
    /// `max_age_seconds` (0 clears it).
    pub fn set(&self, name: &str, value: &str, max_age_seconds: u64) -> HeaderValue {
        let secure = if self.secure { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{name}={value}; Max-Age={max_age_seconds}; Path=/; HttpOnly; SameSite=Lax{secure}"
        ))
        .expect("cookie values are base64url or JWTs")
    }

    /// A `Set-Cookie` value that removes the cookie `name`.
    pub fn clear(&self, name: &str) -> HeaderValue {
        self.set(name, "", 0)
    }
}

/// The value of the cookie `name` in a request, if it sent one.
pub fn read_cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

/// `next` if it is a path on this server that is safe to send the browser to after sign-in: it
/// starts with one `/` (not `//`, which a browser reads as another host), has no backslash
/// (which browsers read as `/`) and no control characters or spaces.
pub fn safe_next(next: &str) -> Option<&str> {
    let safe = next.starts_with('/')
        && !next.starts_with("//")
        && next.len() <= MAX_NEXT_BYTES
        && !next.contains('\\')
        && !next.chars().any(|c| c.is_control() || c.is_whitespace());
    safe.then_some(next)
}

/// A 303 to the sign-in page that comes back to `next` (a path on this server) afterwards.
pub fn to_sign_in(next: &str) -> Redirect {
    let next = safe_next(next).unwrap_or(HOME_PATH);
    if next == HOME_PATH {
        return Redirect::to(SIGN_IN_PATH);
    }
    let query = serde_urlencoded::to_string([("next", next)]).expect("strings encode");
    Redirect::to(&format!("{SIGN_IN_PATH}?{query}"))
}

/// The CSRF token of a session whose cookie holds `token`.
pub fn session_csrf(state: &UiState, token: &str) -> String {
    URL_SAFE_NO_PAD.encode(state.key.mac("csrf session", token.as_bytes()))
}

/// The CSRF token of a sign-in form, bound to the nonce in the browser's sign-in cookie.
pub fn sign_in_csrf(state: &UiState, nonce: &str) -> String {
    URL_SAFE_NO_PAD.encode(state.key.mac("csrf sign-in", nonce.as_bytes()))
}

/// Whether `presented` is the CSRF token for `bound_to` under `purpose`, in constant time.
fn csrf_matches(state: &UiState, purpose: &str, bound_to: &str, presented: Option<&str>) -> bool {
    let Some(mac) = presented.and_then(|text| URL_SAFE_NO_PAD.decode(text).ok()) else {
        return false;
    };
    state.key.verify_mac(purpose, bound_to.as_bytes(), &mac)
}

/// Whether a sign-in form's `presented` CSRF token fits the nonce in the browser's cookie.
pub fn sign_in_csrf_matches(state: &UiState, nonce: Option<&str>, presented: Option<&str>) -> bool {
    nonce.is_some_and(|nonce| csrf_matches(state, "csrf sign-in", nonce, presented))
}

/// Whether `presented` is the CSRF token of the session whose cookie `headers` carry: the check
/// every signed-in form passes, urlencoded ([`SignedForm`]) or multipart.
pub fn session_csrf_matches(state: &UiState, headers: &HeaderMap, presented: Option<&str>) -> bool {
    let token = read_cookie(headers, state.cookies.session).unwrap_or_default();
    csrf_matches(state, "csrf session", &token, presented)
}

/// The 403 a POST without the right CSRF token gets.
pub fn csrf_refused() -> Response {
    message_page(
        StatusCode::FORBIDDEN,
        "This form cannot be accepted",
        "The form was not sent from a page of this server, or it was opened before you last \
         signed in or out. Go back, reload the page and send it again.",
        None,
    )
}

/// A flash holding `notice` for the session whose cookie holds `session_token`: the MAC of the
/// token, then the notice, signed with `key`.
pub fn seal_flash(key: &UiKey, session_token: &str, notice: &[u8]) -> String {
    let mut data = key.mac(FLASH_SESSION_PURPOSE, session_token.as_bytes()).to_vec();
    data.extend_from_slice(notice);
    key.sign(FLASH_PURPOSE, &data)
}

/// The notice in `sealed` if `key` sealed it for the session whose cookie holds
/// `session_token`; `None` for anything else (another session's flash, a changed or made-up
/// one).
pub fn open_flash(key: &UiKey, session_token: &str, sealed: &str) -> Option<Vec<u8>> {
    let data = key.open(FLASH_PURPOSE, sealed)?;
    let (binding, notice) = data.split_at_checked(FLASH_BINDING_BYTES)?;
    key.verify_mac(FLASH_SESSION_PURPOSE, session_token.as_bytes(), binding)
        .then(|| notice.to_vec())
}

/// The `Set-Cookie` that carries `notice` to the next page of the session `headers` carry.
pub fn set_flash(state: &UiState, headers: &HeaderMap, notice: &[u8]) -> HeaderValue {
    let token = read_cookie(headers, state.cookies.session).unwrap_or_default();
    state.cookies.set(
        state.cookies.flash,
        &seal_flash(&state.key, &token, notice),
        FLASH_COOKIE_SECONDS,
    )
}

/// The flash a request carries for its own session, if any, and the `Set-Cookie` that clears
/// the flash cookie when there is one: a flash is shown once.
pub fn take_flash(state: &UiState, headers: &HeaderMap) -> (Option<Vec<u8>>, Option<HeaderValue>) {
    let Some(sealed) = read_cookie(headers, state.cookies.flash) else {
        return (None, None);
    };
    let token = read_cookie(headers, state.cookies.session).unwrap_or_default();
    (
        open_flash(&state.key, &token, &sealed),
        Some(state.cookies.clear(state.cookies.flash)),
    )
}

impl SignedIn {
    /// The signed-in caller of a request, if its session cookie holds a token that verifies:
    /// `Ok(None)` when it has none or a bad one, `Err` with a page when tokens cannot be checked
    /// right now.
    pub async fn of(state: &UiState, headers: &HeaderMap) -> Result<Option<SignedIn>, Response> {
        let Some(token) = read_cookie(headers, state.cookies.session) else {
            return Ok(None);
        };
        match state.auth.authenticate(&token).await {
            Ok(identity) => Ok(Some(SignedIn::new(identity, session_csrf(state, &token)))),
            Err(AuthError::KeysUnavailable(error)) => {
                tracing::error!(%error, "cannot verify a session");
                Err(message_page(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Sign-in is unavailable",
                    "The identity provider's keys cannot be fetched right now, so no session can \
                     be checked. Try again in a moment.",
                    None,
                ))
            }
            Err(error) => {
                tracing::debug!(%error, "session token refused");
                Ok(None)
            }
        }
    }
}

impl<S> FromRequestParts<S> for SignedIn
where
    Arc<UiState>: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        let state = Arc::<UiState>::from_ref(state);
        if let Some(signed_in) = SignedIn::of(&state, &parts.headers).await? {
            return Ok(signed_in);
        }
        // Only a GET comes back where it was: a form cannot be sent again by a redirect.
        let next = match parts.method {
            Method::GET | Method::HEAD => parts
                .uri
                .path_and_query()
                .map(|path| path.as_str())
                .unwrap_or(HOME_PATH),
            _ => HOME_PATH,
        };
        let mut response = to_sign_in(next).into_response();
        if read_cookie(&parts.headers, state.cookies.session).is_some() {
            // An expired or foreign session: drop it.
            response
                .headers_mut()
                .append(header::SET_COOKIE, state.cookies.clear(state.cookies.session));
        }
        Err(response)
    }
}

/// A form posted by a signed-in caller, its CSRF token checked: the caller, and the form's
/// fields as `T` (which need not name the CSRF field).
#[derive(Debug)]
pub struct SignedForm<T> {
    pub signed_in: SignedIn,
    pub form: T,
}

#[derive(Deserialize)]
struct CsrfField {
    csrf: Option<String>,
}

impl<S, T> FromRequest<S> for SignedForm<T>
where
    Arc<UiState>: FromRef<S>,
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let signed_in = SignedIn::from_request_parts(&mut parts, state).await?;
        let state = Arc::<UiState>::from_ref(state);
        let body = axum::body::to_bytes(body, MAX_FORM_BYTES)
            .await
            .map_err(|_| bad_form("The form is too large."))?;
        let csrf: CsrfField =
            serde_urlencoded::from_bytes(&body).map_err(|_| bad_form("The form could not be read."))?;
        if !session_csrf_matches(&state, &parts.headers, csrf.csrf.as_deref()) {
            return Err(csrf_refused());
        }
        let form = serde_urlencoded::from_bytes(&body)
            .map_err(|error| bad_form(&format!("The form could not be read: {error}.")))?;
        Ok(SignedForm { signed_in, form })
    }
}

/// A 400 page for a form that does not parse.
pub fn bad_form(message: &str) -> Response {
    message_page(StatusCode::BAD_REQUEST, "This form cannot be read", message, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_stays_on_this_server() {
        for good in ["/ui", "/ui/runs?x=1", "/oauth/authorize?client_id=a&state=b%20c"] {
            assert_eq!(safe_next(good), Some(good), "{good}");
        }
        for bad in [
            "",
            "ui",
            "//evil.test/",
            "/\\evil.test",
            "https://evil.test/",
            "/ui\n",
            "/a b",
            "javascript:alert(1)",
        ] {
            assert_eq!(safe_next(bad), None, "{bad:?}");
        }
        assert_eq!(safe_next(&format!("/{}", "a".repeat(MAX_NEXT_BYTES))), None);
    }

    #[test]
    fn cookies_are_read_by_exact_name() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("other=1; ap_session=abc.def"),
        );
        headers.append(header::COOKIE, HeaderValue::from_static("xap_session=no"));
        assert_eq!(read_cookie(&headers, "ap_session").as_deref(), Some("abc.def"));
        assert_eq!(read_cookie(&headers, "ap_sign_in"), None);
    }

    #[test]
    fn a_flash_opens_once_sealed_and_only_for_its_session() {
        let key = UiKey::new([3; 32]);
        let sealed = seal_flash(&key, "session-a", b"approved");
        assert_eq!(
            open_flash(&key, "session-a", &sealed).as_deref(),
            Some(&b"approved"[..])
        );
        assert_eq!(open_flash(&key, "session-b", &sealed), None, "another session");
        assert_eq!(
            open_flash(&UiKey::new([4; 32]), "session-a", &sealed),
            None,
            "another key"
        );
        let other_purpose = key.sign("client", b"approved");
        assert_eq!(
            open_flash(&key, "session-a", &other_purpose),
            None,
            "signed for another use"
        );
        for made_up in ["", "approved", "YXBwcm92ZWQ.AAAA"] {
            assert_eq!(open_flash(&key, "session-a", made_up), None, "{made_up:?}");
        }
    }

    #[test]
    fn cookie_attributes_follow_the_public_url() {
        let plain = Cookies::new(false).set("ap_session", "t", 60);
        assert_eq!(plain, "ap_session=t; Max-Age=60; Path=/; HttpOnly; SameSite=Lax");
        let secure = Cookies::new(true);
        assert_eq!(secure.session, "__Host-ap_session");
        assert!(
            secure
                .set(secure.session, "t", 60)
                .to_str()
                .unwrap()
                .ends_with("; Secure")
        );
    }
}
