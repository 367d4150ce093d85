//! Mutual TLS between roles: an actor host shows a certificate the cluster's CA signed and
//! answers only callers that show one too, so nobody who merely reaches its port can call runs
//! under an identity of their choosing.

use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, Server, ServerTlsConfig};

/// One role's TLS material between roles, as PEM: the CA that signs every role's certificate,
/// this role's certificate and its key (shown as a server by an actor host, as a client by
/// gateways and schedulers), and optionally the one name every actor host's certificate is
/// checked against instead of the host in its URL.
#[derive(Clone)]
pub struct RoleTls {
    ca_pem: Vec<u8>,
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    server_name: Option<String>,
}

impl std::fmt::Debug for RoleTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoleTls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

/// TLS material that cannot be used, with why.
#[derive(Debug, thiserror::Error)]
#[error("the TLS settings between roles cannot be used: {0}")]
pub struct BadTls(String);

impl RoleTls {
    /// Checks the material by building the server's and the client's configuration from it, so
    /// an unreadable certificate or key stops a role at start rather than failing its calls.
    pub fn new(
        ca_pem: Vec<u8>,
        cert_pem: Vec<u8>,
        key_pem: Vec<u8>,
        server_name: Option<String>,
    ) -> Result<RoleTls, BadTls> {
        // TLS here uses the process's default crypto provider: ring, as everywhere in this
        // program, unless the process chose one already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let tls = RoleTls {
            ca_pem,
            cert_pem,
            key_pem,
            server_name,
        };
        for (what, pem) in [
            ("the CA certificate", &tls.ca_pem),
            ("the certificate", &tls.cert_pem),
        ] {
            if !String::from_utf8_lossy(pem).contains("-----BEGIN CERTIFICATE-----") {
                return Err(BadTls(format!("{what} is not a PEM certificate")));
            }
        }
        if !String::from_utf8_lossy(&tls.key_pem).contains("PRIVATE KEY-----") {
            return Err(BadTls("the key is not a PEM private key".into()));
        }
        Server::builder()
            .tls_config(tls.server_config())
            .map_err(|e| BadTls(format!("as an actor host: {e}")))?;
        Endpoint::from_static("https://localhost")
            .tls_config(tls.client_config())
            .map_err(|e| BadTls(format!("as a caller: {e}")))?;
        Ok(tls)
    }

    /// What an actor host serves with: its certificate, and client certificates required and
    /// checked against the CA.
    pub fn server_config(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(Identity::from_pem(&self.cert_pem, &self.key_pem))
            .client_ca_root(Certificate::from_pem(&self.ca_pem))
    }

    /// What a caller connects with: the CA to check the host against, and its own certificate.
    pub(crate) fn client_config(&self) -> ClientTlsConfig {
        let config = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.ca_pem))
            .identity(Identity::from_pem(&self.cert_pem, &self.key_pem));
        match &self.server_name {
            Some(name) => config.domain_name(name.clone()),
            None => config,
        }
    }
}
