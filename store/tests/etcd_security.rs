//! `EtcdStore` against a secured etcd member on loopback: TLS with the member's CA, client
//! certificates for a member that requires them, and etcd's user authentication — each refused
//! in the way a misconfiguration would be, before anything is written.

use std::sync::Arc;
use std::time::Duration;

use agentprocess_store::{
    EtcdOptions, EtcdStore, EtcdTls, EtcdUser, Store, StoreError, Txn, TxnOp, conformance,
};
use agentprocess_testkit::{ClientCerts, SecuredEtcd, TestPki};

fn pem(path: &std::path::Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn tls(pki: &TestPki, client_certificate: bool) -> EtcdTls {
    EtcdTls {
        ca_pem: Some(pem(&pki.ca_cert)),
        client_identity: client_certificate.then(|| (pem(&pki.client_cert), pem(&pki.client_key))),
        server_name: None,
    }
}

fn options(tls: Option<EtcdTls>, user: Option<EtcdUser>) -> EtcdOptions {
    EtcdOptions {
        tls,
        user,
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(20),
        ..EtcdOptions::default()
    }
}

async fn put_then_get(store: &dyn Store, key: &str) {
    store
        .txn(Txn::new().and_then([TxnOp::put(key, "value")]))
        .await
        .expect("put over the secured connection");
    let (found, _) = store
        .get(key.as_bytes())
        .await
        .expect("get over the secured connection");
    assert_eq!(found.expect("the key just written").value, b"value");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_client_certificate_passes_the_conformance_suite() {
    let member = SecuredEtcd::start(ClientCerts::Required);
    let endpoints = vec![member.client_url()];
    let store = EtcdStore::connect(&endpoints, options(Some(tls(member.pki(), true)), None))
        .await
        .expect("connect with the CA and a client certificate");
    assert_eq!(store.endpoints(), endpoints);
    conformance::run_all(Arc::new(store)).await;
}

/// The reason a refused connection gives: `Unavailable` naming the endpoint, and why.
fn unavailable_reason(refused: Result<EtcdStore, StoreError>, endpoint: &str) -> String {
    match refused {
        Err(StoreError::Unavailable { reason, .. }) => {
            assert!(reason.contains(endpoint), "the reason names {endpoint}: {reason}");
            reason
        }
        other => panic!("a refused connection is Unavailable: {other:?}"),
    }
}

/// A member with `--client-cert-auth` ends the TLS handshake of a client that shows no
/// certificate: with a `bad_certificate` alert, or by closing the connection when the client
/// had not read the alert yet. The same client with a certificate, nothing else changed, is
/// served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_requiring_client_certificates_refuses_a_client_without_one() {
    let member = SecuredEtcd::start(ClientCerts::Required);
    let endpoints = vec![member.client_url()];
    let refused = EtcdStore::connect(&endpoints, options(Some(tls(member.pki(), false)), None)).await;
    let reason = unavailable_reason(refused, &member.client_url());
    assert!(
        reason.contains("received fatal alert: BadCertificate") || reason.contains("connection closed"),
        "the member refused the handshake: {reason}"
    );
    let store = EtcdStore::connect(&endpoints, options(Some(tls(member.pki(), true)), None))
        .await
        .expect("the same client with its certificate connects");
    put_then_get(&store, "tls/with-a-certificate").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_certificate_another_ca_signed_is_not_trusted() {
    let member = SecuredEtcd::start(ClientCerts::NotAsked);
    let endpoints = vec![member.client_url()];
    let stranger = EtcdTls {
        ca_pem: Some(pem(&member.pki().stranger_ca_cert)),
        ..EtcdTls::default()
    };
    let refused = EtcdStore::connect(&endpoints, options(Some(stranger), None)).await;
    let reason = unavailable_reason(refused, &member.client_url());
    assert!(
        reason.contains("invalid peer certificate: UnknownIssuer"),
        "the client refused the member's certificate as signed by an unknown CA: {reason}"
    );
    // The same member, trusted through its own CA, answers.
    let store = EtcdStore::connect(&endpoints, options(Some(tls(member.pki(), false)), None))
        .await
        .expect("connect trusting the member's CA");
    put_then_get(&store, "tls/trusted").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_text_and_tls_are_never_mixed_up() {
    let member = SecuredEtcd::start(ClientCerts::NotAsked);
    let https = vec![member.client_url()];
    let http = vec![member.client_url().replace("https://", "http://")];
    for (endpoints, tls) in [(https, None), (http, Some(tls(member.pki(), false)))] {
        let refused = EtcdStore::connect(&endpoints, options(tls, None)).await;
        assert!(
            matches!(refused, Err(StoreError::Config(_))),
            "{endpoints:?}: {refused:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_and_password_reach_a_member_with_authentication_on() {
    let member = SecuredEtcd::start(ClientCerts::NotAsked);
    member
        .enable_authentication("agentprocess", "the right password")
        .await;
    let endpoints = vec![member.client_url()];
    let user = |password: &str| EtcdUser {
        name: "agentprocess".into(),
        password: password.into(),
    };

    let store = EtcdStore::connect(
        &endpoints,
        options(Some(tls(member.pki(), false)), Some(user("the right password"))),
    )
    .await
    .expect("connect as the user");
    put_then_get(&store, "auth/written").await;
    let lease = store.lease_grant(10).await.expect("grant a lease as the user");
    store.lease_revoke(lease.id).await.expect("revoke it");
    // The member forgets an unused login token after 2 s: the store logs in again by itself.
    tokio::time::sleep(Duration::from_secs(4)).await;
    put_then_get(&store, "auth/after-the-token-expired").await;

    let wrong = EtcdStore::connect(
        &endpoints,
        options(Some(tls(member.pki(), false)), Some(user("a wrong one"))),
    )
    .await;
    match wrong {
        Err(StoreError::Unavailable { reason, .. }) => {
            assert!(
                reason.contains("authentication failed"),
                "the reason names the login: {reason}"
            )
        }
        other => panic!("a wrong password must not connect: {other:?}"),
    }

    // Without a user, etcd refuses the write: a configuration error that says what is missing.
    // Nothing is written.
    let anonymous = EtcdStore::connect(&endpoints, options(Some(tls(member.pki(), false)), None))
        .await
        .expect("connecting needs no user");
    let refused = anonymous
        .txn(Txn::new().and_then([TxnOp::put("auth/anonymous", "value")]))
        .await;
    match refused {
        Err(StoreError::Config(reason)) => assert!(
            reason.contains("the cluster has authentication on and the store has no user")
                && reason.contains("etcdserver: user name is empty"),
            "the reason names the missing user: {reason}"
        ),
        other => panic!("an anonymous write on a cluster with authentication: {other:?}"),
    }
    let (found, _) = store.get(b"auth/anonymous").await.expect("get as the user");
    assert!(found.is_none(), "the refused write left nothing");
}
