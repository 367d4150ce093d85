//! The web UI's shared secret: HMAC-signed values (client ids, codes, sign-in state) and MACs
//! (CSRF tokens) that every gateway holding the same key makes and checks alike.
//!
//! Each use names its PURPOSE, which is signed in front of the value, so a value signed for one
//! use (an authorization code) never passes as another (a client id).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::fmt;

/// Bytes in a key.
pub const KEY_BYTES: usize = 32;

/// The key the web UI signs with. Every gateway of a deployment must hold the same one (it is
/// derived from the signed-file-URL key, which they share); never printed.
#[derive(Clone)]
pub struct UiKey([u8; KEY_BYTES]);

impl fmt::Debug for UiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UiKey(..)")
    }
}

impl UiKey {
    pub fn new(key: [u8; KEY_BYTES]) -> UiKey {
        UiKey(key)
    }

    /// A key of this process alone: values it signs are good only on this gateway.
    pub fn random() -> UiKey {
        let mut key = [0u8; KEY_BYTES];
        getrandom::fill(&mut key).expect("the system has randomness");
        UiKey(key)
    }

    /// The MAC of `data` for `purpose`.
    pub fn mac(&self, purpose: &str, data: &[u8]) -> [u8; 32] {
        self.hmac(purpose, data).finalize().into_bytes().into()
    }

    /// Whether `mac` is the MAC of `data` for `purpose`, compared in constant time.
    pub fn verify_mac(&self, purpose: &str, data: &[u8], mac: &[u8]) -> bool {
        self.hmac(purpose, data).verify_slice(mac).is_ok()
    }

    /// `data` and its MAC for `purpose`, as one URL-safe text: `base64url(data).base64url(mac)`.
    pub fn sign(&self, purpose: &str, data: &[u8]) -> String {
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(data),
            URL_SAFE_NO_PAD.encode(self.mac(purpose, data))
        )
    }

    /// The data in `signed` if this key signed it for `purpose`, unchanged. The MAC is checked
    /// before anything in the data is believed.
    pub fn open(&self, purpose: &str, signed: &str) -> Option<Vec<u8>> {
        let (data, mac) = signed.split_once('.')?;
        let data = URL_SAFE_NO_PAD.decode(data).ok()?;
        let mac = URL_SAFE_NO_PAD.decode(mac).ok()?;
        self.verify_mac(purpose, &data, &mac).then_some(data)
    }

    fn hmac(&self, purpose: &str, data: &[u8]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0).expect("HMAC takes any key");
        mac.update(b"agentprocess ui\0");
        mac.update(purpose.as_bytes());
        mac.update(b"\0");
        mac.update(data);
        mac
    }
}

/// `bytes` random bytes in base64url: nonces, code ids.
pub fn random_text(bytes: usize) -> String {
    let mut random = vec![0u8; bytes];
    getrandom::fill(&mut random).expect("the system has randomness");
    URL_SAFE_NO_PAD.encode(random)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_opens_only_for_its_purpose_and_key() {
        let key = UiKey::new([7; KEY_BYTES]);
        let signed = key.sign("client", b"{\"r\":1}");
        assert_eq!(key.open("client", &signed).as_deref(), Some(&b"{\"r\":1}"[..]));
        assert_eq!(key.open("code", &signed), None, "another purpose");
        assert_eq!(
            UiKey::new([8; KEY_BYTES]).open("client", &signed),
            None,
            "another key"
        );
        let (data, mac) = signed.split_once('.').unwrap();
        let changed = format!("{}A.{mac}", &data[..data.len() - 1]);
        assert_eq!(key.open("client", &changed), None, "changed data");
        for malformed in ["", ".", "no-dot", "!!.!!"] {
            assert_eq!(key.open("client", malformed), None, "{malformed:?}");
        }
    }
}
