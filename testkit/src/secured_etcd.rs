//! A one-member etcd that serves clients over TLS, with certificates made for the test.
//!
//! [`SecuredEtcd::start`] makes a certificate authority, a server certificate for `127.0.0.1`
//! and `localhost`, and a client certificate ([`TestPki`]), writes them as PEM files into a
//! temporary folder, and runs `etcd` with `https://` client URLs; with
//! [`ClientCerts::Required`] the member refuses clients without a certificate the CA signed
//! (`--client-cert-auth`). It is ready when a TLS connection is accepted. Dropping it kills
//! the member and removes the folder. Login tokens expire after 2 s unused.
//! [`SecuredEtcd::enable_authentication`] turns on etcd's own user authentication.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

use crate::etcd_cluster::spawn_etcd;
use crate::free_loopback_ports;

/// How long the member may take to listen before the start is a failure.
const START_PATIENCE: Duration = Duration::from_secs(60);

/// PEM files of a certificate authority and the certificates it signed.
#[derive(Debug, Clone)]
pub struct TestPki {
    /// The CA certificate every client trusts.
    pub ca_cert: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    /// A client certificate the CA signed (for `--client-cert-auth`).
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A second CA that signed nothing the member trusts: a client that trusts only it must
    /// be refused.
    pub stranger_ca_cert: PathBuf,
    /// A certificate for `127.0.0.1` and `localhost` (server and client use) that the second CA
    /// signed: whoever shows it must be refused by anyone who trusts only the first.
    pub stranger_cert: PathBuf,
    pub stranger_key: PathBuf,
}

impl TestPki {
    /// Makes the certificates and writes them into `dir`.
    pub fn generate(dir: &Path) -> TestPki {
        let ca = certificate_authority("agentprocess test CA");
        let stranger = certificate_authority("a CA nobody here trusts");
        // etcd's own gateway dials the member with the server certificate as its client one.
        let (server_cert, server_key) = host_certificate("etcd test member", &ca);
        let (stranger_cert, stranger_key) = host_certificate("a host nobody here trusts", &stranger);
        let client_key = KeyPair::generate().expect("client key");
        let mut client = CertificateParams::new(Vec::<String>::new()).expect("client certificate");
        client.distinguished_name.push(DnType::CommonName, "agentprocess");
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_cert = client
            .signed_by(&client_key, &ca)
            .expect("sign the client certificate");

        let write = |name: &str, pem: String| {
            let path = dir.join(name);
            std::fs::write(&path, pem).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
            path
        };
        TestPki {
            ca_cert: write("ca.pem", ca.pem()),
            server_cert: write("server.pem", server_cert.pem()),
            server_key: write("server-key.pem", server_key.serialize_pem()),
            client_cert: write("client.pem", client_cert.pem()),
            client_key: write("client-key.pem", client_key.serialize_pem()),
            stranger_ca_cert: write("stranger-ca.pem", stranger.pem()),
            stranger_cert: write("stranger.pem", stranger_cert.pem()),
            stranger_key: write("stranger-key.pem", stranger_key.serialize_pem()),
        }
    }
}

/// A certificate for `localhost` and `127.0.0.1`, for server and client use, that `issuer`
/// signed; and its key.
fn host_certificate(name: &str, issuer: &CertifiedIssuer<'static, KeyPair>) -> (rcgen::Certificate, KeyPair) {
    let key = KeyPair::generate().expect("host key");
    let mut params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .expect("host certificate names");
    params.distinguished_name.push(DnType::CommonName, name);
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let certificate = params.signed_by(&key, issuer).expect("sign the host certificate");
    (certificate, key)
}

fn certificate_authority(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key")).expect("self-sign the CA")
}

/// Whether the member asks clients for a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientCerts {
    /// TLS only: any client that trusts the CA may connect.
    NotAsked,
    /// `--client-cert-auth`: a client must show a certificate the CA signed.
    Required,
}

/// A running one-member etcd with TLS on its client URL. Killed when dropped.
#[derive(Debug)]
pub struct SecuredEtcd {
    client: SocketAddr,
    client_certs: ClientCerts,
    pki: TestPki,
    process: Child,
    /// Holds the certificates, the data folder and the log; removed after the member is killed.
    dir: tempfile::TempDir,
}

impl SecuredEtcd {
    /// Starts the member and waits until it accepts connections.
    pub fn start(client_certs: ClientCerts) -> SecuredEtcd {
        let dir = tempfile::Builder::new()
            .prefix("etcd-tls-")
            .tempdir()
            .expect("temporary folder for the etcd member");
        let pki = TestPki::generate(dir.path());
        let ports = free_loopback_ports(2);
        let client = SocketAddr::from(([127, 0, 0, 1], ports[0]));
        let client_url = format!("https://{client}");
        let peer_url = format!("http://127.0.0.1:{}", ports[1]);
        let log = dir.path().join("etcd.log");
        let mut command = Command::new("etcd");
        command
            .args(["--name", "secured"])
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("secured={peer_url}")])
            .arg("--cert-file")
            .arg(&pki.server_cert)
            .arg("--key-file")
            .arg(&pki.server_key)
            // Login tokens expire after 2 s unused (etcd's default is 300 s), so a test sees a
            // client renew one.
            .args(["--auth-token-ttl", "2"])
            .args(["--logger", "zap", "--log-level", "warn"]);
        // etcd 3.4 asks every client for a certificate once it has a CA to check them with.
        if client_certs == ClientCerts::Required {
            command
                .arg("--client-cert-auth")
                .arg("--trusted-ca-file")
                .arg(&pki.ca_cert);
        }
        let process = spawn_etcd(&mut command, &log);
        let mut member = SecuredEtcd {
            client,
            client_certs,
            pki,
            process,
            dir,
        };
        member.wait_until_listening(&log);
        member
    }

    /// The member's client URL, `https://127.0.0.1:PORT`.
    pub fn client_url(&self) -> String {
        format!("https://{}", self.client)
    }

    /// The certificates the member was started with.
    pub fn pki(&self) -> &TestPki {
        &self.pki
    }

    /// The folder the member's files live in, for a test's own files (settings, passwords).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Turns on etcd's user authentication with a `root` user and a user `name` whose role may
    /// read and write every key, through etcd's own client.
    pub async fn enable_authentication(&self, name: &str, password: &str) {
        let ca = std::fs::read(&self.pki.ca_cert).expect("read the CA certificate");
        let mut tls = etcd_client::TlsOptions::new().ca_certificate(etcd_client::Certificate::from_pem(ca));
        if self.client_certs == ClientCerts::Required {
            let cert = std::fs::read(&self.pki.client_cert).expect("read the client certificate");
            let key = std::fs::read(&self.pki.client_key).expect("read the client key");
            tls = tls.identity(etcd_client::Identity::from_pem(cert, key));
        }
        let connect = etcd_client::ConnectOptions::new().with_tls(tls);
        let mut client = etcd_client::Client::connect([self.client_url()], Some(connect))
            .await
            .expect("connect to turn authentication on");
        client
            .user_add("root", "root-password", None)
            .await
            .expect("add root");
        client
            .user_grant_role("root", "root")
            .await
            .expect("root is root");
        client.user_add(name, password, None).await.expect("add the user");
        client.role_add("everything").await.expect("add a role");
        let every_key = etcd_client::Permission::read_write(vec![0u8]).with_from_key();
        client
            .role_grant_permission("everything", every_key)
            .await
            .expect("grant every key");
        client
            .user_grant_role(name, "everything")
            .await
            .expect("grant the role");
        client.auth_enable().await.expect("enable authentication");
    }

    fn wait_until_listening(&mut self, log: &Path) {
        let deadline = Instant::now() + START_PATIENCE;
        while TcpStream::connect_timeout(&self.client, Duration::from_millis(200)).is_err() {
            if let Ok(Some(status)) = self.process.try_wait() {
                panic!(
                    "etcd with TLS exited at start ({status}); its log:\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "etcd with TLS did not listen within {START_PATIENCE:?}; its log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for SecuredEtcd {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            eprintln!("the etcd member's last log lines:");
            for line in tail.iter().rev() {
                eprintln!("  {line}");
            }
        }
    }
}
