//! The run service over gRPC on loopback (ARCHITECTURE: gateways forward tool calls to actor
//! hosts over gRPC, with the caller's identity as typed fields): every write and read arrives as
//! it was sent, answers and refusals come back exactly, and infrastructure failures are `retry`.

use agentprocess_proto::wire::run_service_client::RunServiceClient;
use agentprocess_proto::{
    ClientOptions, DEFAULT_MAX_MESSAGE_BYTES, GrpcRunService, RoleTls, run_service_server, wire,
};
use agentprocess_run_actor::runtime::{Clock, LocalBlobs, Runtime, RuntimeConfig};
use agentprocess_service::trace::{self, TraceParent};
use agentprocess_service::{
    Caller, CallerKind, Decision, ErrorCode, EvidenceItem, GetWork, ListRuns, Mode, OrgId, ReadySteps, RunId,
    RunService, ServiceError, StepId, Submission, ToolOutcome, ToolRefusal, Upload, Write,
};
use agentprocess_store::{EmbeddedOptions, EmbeddedStore};
use async_trait::async_trait;
use serde_json::{Map, Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_stream::wrappers::TcpListenerStream;

/// One call as the service received it.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Execute(Caller, Write, String),
    FireTimer(OrgId, RunId, String),
    GetRun(Caller, RunId),
    RunHistory(Caller, RunId),
    InspectRun(Caller, RunId),
    GetWork(Caller, GetWork),
    ListRuns(Caller, ListRuns),
    ReadySteps(Caller, ReadySteps),
    ListProcesses(Caller, Option<String>),
    Upload(Caller, Upload, String),
}

/// A run service that records every call and answers each with `answer`.
#[derive(Debug)]
struct Recorder {
    seen: Mutex<Vec<Seen>>,
    /// The trace context each call ran in on the server's side.
    traces: Mutex<Vec<Option<TraceParent>>>,
    answer: Result<ToolOutcome, ServiceError>,
}

impl Recorder {
    fn answering(answer: Result<ToolOutcome, ServiceError>) -> Arc<Self> {
        Arc::new(Recorder {
            seen: Mutex::new(Vec::new()),
            traces: Mutex::new(Vec::new()),
            answer,
        })
    }

    fn record(&self, seen: Seen) -> Result<ToolOutcome, ServiceError> {
        self.seen.lock().unwrap().push(seen);
        self.traces.lock().unwrap().push(trace::current());
        self.answer.clone()
    }

    fn last(&self) -> Seen {
        self.seen.lock().unwrap().last().cloned().expect("a call arrived")
    }
}

#[async_trait]
impl RunService for Recorder {
    async fn execute(
        &self,
        caller: &Caller,
        write: Write,
        request_id: &str,
    ) -> Result<ToolOutcome, ServiceError> {
        self.record(Seen::Execute(caller.clone(), write, request_id.into()))
    }

    async fn fire_timer(
        &self,
        organization: &OrgId,
        run_id: &RunId,
        timer_id: &str,
    ) -> Result<(), ServiceError> {
        self.record(Seen::FireTimer(
            organization.clone(),
            run_id.clone(),
            timer_id.into(),
        ))
        .map(|_| ())
    }

    async fn get_run(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, ServiceError> {
        self.record(Seen::GetRun(caller.clone(), run_id.clone()))
    }

    async fn run_history(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, ServiceError> {
        self.record(Seen::RunHistory(caller.clone(), run_id.clone()))
    }

    async fn inspect_run(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, ServiceError> {
        self.record(Seen::InspectRun(caller.clone(), run_id.clone()))
    }

    async fn get_work(&self, caller: &Caller, request: GetWork) -> Result<ToolOutcome, ServiceError> {
        self.record(Seen::GetWork(caller.clone(), request))
    }

    async fn list_runs(&self, caller: &Caller, request: ListRuns) -> Result<ToolOutcome, ServiceError> {
        self.record(Seen::ListRuns(caller.clone(), request))
    }

    async fn ready_steps(&self, caller: &Caller, request: ReadySteps) -> Result<ToolOutcome, ServiceError> {
        self.record(Seen::ReadySteps(caller.clone(), request))
    }

    async fn list_processes(
        &self,
        caller: &Caller,
        cursor: Option<String>,
    ) -> Result<ToolOutcome, ServiceError> {
        self.record(Seen::ListProcesses(caller.clone(), cursor))
    }

    async fn upload(
        &self,
        caller: &Caller,
        upload: Upload,
        request_id: &str,
    ) -> Result<ToolOutcome, ServiceError> {
        self.record(Seen::Upload(caller.clone(), upload, request_id.into()))
    }
}

/// Serves `service` on a loopback port; its URL. The server stops with the test's runtime.
async fn serve(service: Arc<dyn RunService>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(run_service_server(service, DEFAULT_MAX_MESSAGE_BYTES))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    url
}

fn client(url: &str) -> GrpcRunService {
    GrpcRunService::new(url, &ClientOptions::default()).unwrap()
}

fn agent() -> Caller {
    Caller {
        organization: "acme".into(),
        kind: CallerKind::Agent {
            id: "a_screener".into(),
        },
        operator: false,
    }
}

fn operator_person() -> Caller {
    Caller {
        organization: "globex".into(),
        kind: CallerKind::Person {
            email: "mira@globex.test".into(),
            groups: vec!["finance".into(), "tier-2".into()],
        },
        operator: true,
    }
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// Numbers whose spelling must survive (spec: canonical JSON keeps them apart).
fn precise() -> Value {
    serde_json::from_str(
        r#"{"total":1.50,"big":123456789012345678901234567890,"tiny":1e-400,"text":"Prüfung \"v1\""}"#,
    )
    .unwrap()
}

fn every_write() -> Vec<Write> {
    let evidence = vec![
        EvidenceItem {
            kind: "file".into(),
            reference: "f_1".into(),
        },
        EvidenceItem {
            kind: "link".into(),
            reference: "https://erp.test/1".into(),
        },
    ];
    vec![
        Write::StartRun {
            process: "training-request".into(),
            version: Some(3),
            inputs: precise(),
            mode: Mode::Test,
        },
        Write::StartRun {
            process: "p".into(),
            version: None,
            inputs: json!({}),
            mode: Mode::Live,
        },
        Write::Claim {
            run_id: "r_1".into(),
            step: StepId::from_wire("policy_check"),
        },
        Write::Renew {
            token: "t_1".into(),
            progress: Some("half way".into()),
        },
        Write::Renew {
            token: "t_1".into(),
            progress: None,
        },
        Write::Submit {
            token: "t_2".into(),
            submission: Submission {
                output: Some(object(precise())),
                evidence: evidence.clone(),
                summary: Some("Matched.".into()),
                next: Some("pay".into()),
                reason: Some("within policy".into()),
            },
        },
        Write::Submit {
            token: "t_2".into(),
            submission: Submission::default(),
        },
        Write::Escalate {
            token: "t_3".into(),
            note: "cannot read the receipt".into(),
        },
        Write::Decide {
            run_id: "r_2".into(),
            work_item: "w_1".into(),
            snapshot: "s_1".into(),
            decision: Decision::Completed,
            output: Some(object(json!({ "paid": 42.5 }))),
            evidence: Some(evidence),
            summary: Some("Paid.".into()),
            next: Some("done".into()),
            reason: Some("approved by policy".into()),
            note: Some("see the ERP".into()),
        },
        Write::Decide {
            run_id: "r_2".into(),
            work_item: "w_1".into(),
            snapshot: "s_1".into(),
            decision: Decision::Rejected,
            output: None,
            evidence: Some(Vec::new()),
            summary: None,
            next: None,
            reason: None,
            note: None,
        },
        Write::Cancel {
            run_id: "r_3".into(),
            reason: "started twice".into(),
        },
        Write::SendEvent {
            run_id: "r_4".into(),
            name: "settled".into(),
            data: Some(object(json!({ "ref": "early-1" }))),
        },
        Write::SendEvent {
            run_id: "r_4".into(),
            name: "settled".into(),
            data: None,
        },
    ]
}

/// Every kind of write, with every optional field present and absent (an absent evidence list
/// apart from an empty one), arrives with its caller and `requestId` exactly as sent, and its
/// answer comes back with numbers as they were written.
#[tokio::test]
async fn every_write_arrives_as_sent_and_its_answer_comes_back_exactly() {
    let answer = precise();
    let recorder = Recorder::answering(Ok(ToolOutcome::Ok(answer.clone())));
    let service = client(&serve(recorder.clone()).await);
    for (n, write) in every_write().into_iter().enumerate() {
        let caller = if n % 2 == 0 { agent() } else { operator_person() };
        let request_id = format!("req-{n}");
        let outcome = service
            .execute(&caller, write.clone(), &request_id)
            .await
            .unwrap();
        assert_eq!(recorder.last(), Seen::Execute(caller, write, request_id));
        let ToolOutcome::Ok(data) = outcome else {
            panic!("{outcome:?}")
        };
        assert_eq!(data.to_string(), answer.to_string());
    }
}

/// Reads, uploads and fired timers arrive as sent.
#[tokio::test]
async fn reads_uploads_and_timers_arrive_as_sent() {
    let recorder = Recorder::answering(Ok(ToolOutcome::Ok(json!({ "items": [] }))));
    let service = client(&serve(recorder.clone()).await);
    let person = operator_person();

    service.get_run(&person, &"r_9".into()).await.unwrap();
    assert_eq!(recorder.last(), Seen::GetRun(person.clone(), "r_9".into()));
    let history = service.run_history(&person, &"r_9".into()).await.unwrap();
    assert_eq!(recorder.last(), Seen::RunHistory(person.clone(), "r_9".into()));
    assert_eq!(history, ToolOutcome::Ok(json!({ "items": [] })));
    service.inspect_run(&person, &"r_9".into()).await.unwrap();
    assert_eq!(recorder.last(), Seen::InspectRun(person.clone(), "r_9".into()));

    for request in [
        GetWork::default(),
        GetWork {
            limit: Some(20),
            cursor: Some("c_1".into()),
            process: Some("training-request".into()),
            wait: Some(Duration::from_secs(20)),
            only_new: false,
        },
        GetWork {
            wait: Some(Duration::from_secs(20)),
            only_new: true,
            ..GetWork::default()
        },
    ] {
        service.get_work(&person, request.clone()).await.unwrap();
        assert_eq!(recorder.last(), Seen::GetWork(person.clone(), request));
    }
    // A wait past the longest reaches the host as the longest.
    let long = GetWork {
        wait: Some(Duration::from_secs(600)),
        ..GetWork::default()
    };
    service.get_work(&person, long).await.unwrap();
    let capped = GetWork {
        wait: Some(agentprocess_service::MAX_WAIT_FOR_WORK),
        ..GetWork::default()
    };
    assert_eq!(recorder.last(), Seen::GetWork(person.clone(), capped));

    for request in [
        ListRuns::default(),
        ListRuns {
            process: Some("p".into()),
            state: Some("ended".into()),
            inputs: Some(object(precise())),
            limit: Some(100),
            cursor: Some("c_2".into()),
        },
    ] {
        service.list_runs(&person, request.clone()).await.unwrap();
        assert_eq!(recorder.last(), Seen::ListRuns(person.clone(), request));
    }

    for request in [
        ReadySteps::default(),
        ReadySteps {
            limit: Some(7),
            cursor: Some("c_4".into()),
            ready_until_ms: Some(1_700_000_000_000),
        },
    ] {
        service.ready_steps(&person, request.clone()).await.unwrap();
        assert_eq!(recorder.last(), Seen::ReadySteps(person.clone(), request));
    }

    service
        .list_processes(&agent(), Some("c_3".into()))
        .await
        .unwrap();
    assert_eq!(recorder.last(), Seen::ListProcesses(agent(), Some("c_3".into())));
    service.list_processes(&agent(), None).await.unwrap();
    assert_eq!(recorder.last(), Seen::ListProcesses(agent(), None));

    // An upload of the gateway's default limit travels in one message.
    let upload = Upload {
        file_name: "Prüfbericht.pdf".into(),
        content_type: "application/pdf".into(),
        bytes: (0..=255u8).cycle().take(10 * 1024 * 1024).collect(),
    };
    service.upload(&agent(), upload.clone(), "u-1").await.unwrap();
    assert_eq!(recorder.last(), Seen::Upload(agent(), upload, "u-1".into()));

    service
        .fire_timer(&"acme".into(), &"r_5".into(), "due.w_1.3")
        .await
        .unwrap();
    assert_eq!(
        recorder.last(),
        Seen::FireTimer("acme".into(), "r_5".into(), "due.w_1.3".into())
    );
}

/// Spec §4.3: a refusal is an answer, with its code, message and issues; an infrastructure
/// failure behind the service is an error the caller sees as `retry`, not a refusal.
#[tokio::test]
async fn refusals_are_answers_and_failures_are_unavailable() {
    for code in ErrorCode::ALL {
        let refusal = ToolRefusal {
            code,
            message: "a submission broke a rule".into(),
            issues: vec!["output.total: not a number".into(), "evidence: required".into()],
        };
        let recorder = Recorder::answering(Ok(ToolOutcome::Refused(refusal.clone())));
        let service = client(&serve(recorder).await);
        let outcome = service.get_run(&agent(), &"r_1".into()).await.unwrap();
        assert_eq!(outcome, ToolOutcome::Refused(refusal));
    }

    let recorder = Recorder::answering(Err(ServiceError::Unavailable("the store is down".into())));
    let service = client(&serve(recorder).await);
    let Err(ServiceError::Unavailable(message)) = service.get_run(&agent(), &"r_1".into()).await else {
        panic!("an infrastructure failure arrives as Unavailable");
    };
    assert!(message.contains("the store is down"), "{message}");
    let Err(ServiceError::Unavailable(message)) =
        service.fire_timer(&"acme".into(), &"r_1".into(), "t").await
    else {
        panic!("an infrastructure failure arrives as Unavailable");
    };
    assert!(message.contains("the store is down"), "{message}");

    // A host that does not own the run's shard says so, and the client tells it apart.
    let recorder = Recorder::answering(Err(ServiceError::NotOwner(
        "this host does not own shard 7".into(),
    )));
    let service = client(&serve(recorder).await);
    let outcome = service.get_run(&agent(), &"r_1".into()).await;
    assert_eq!(
        outcome,
        Err(ServiceError::NotOwner("this host does not own shard 7".into()))
    );

    // A host at its limit says which and when to come back, and the client tells it apart.
    let overloaded = ServiceError::Overloaded {
        limit: "cluster.max_in_flight_calls_per_host".into(),
        retry_after_ms: 100,
    };
    let service = client(&serve(Recorder::answering(Err(overloaded.clone()))).await);
    assert_eq!(service.get_run(&agent(), &"r_1".into()).await, Err(overloaded));
}

/// No host listening: the call fails as `retry` within the connect timeout, and a bad URL is
/// refused when the client is made.
#[tokio::test]
async fn an_unreachable_host_is_unavailable_and_a_bad_url_is_refused() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let options = ClientOptions {
        connect_timeout: Duration::from_secs(2),
        ..ClientOptions::default()
    };
    let service = GrpcRunService::new(&url, &options).unwrap();
    let Err(ServiceError::Unavailable(message)) = service.get_run(&agent(), &"r_1".into()).await else {
        panic!("an unreachable host is Unavailable");
    };
    assert!(message.contains("Unavailable"), "{message}");

    let error = GrpcRunService::new("not a url at all", &options).unwrap_err();
    assert!(error.to_string().contains("not a url at all"), "{error}");
}

/// A message that does not say what the service needs (no caller, no write, a mode or decision
/// the protocol does not have, output that is not a JSON object) is refused as INVALID_ARGUMENT
/// and never reaches the service.
#[tokio::test]
async fn malformed_messages_are_invalid_arguments_and_reach_nothing() {
    let recorder = Recorder::answering(Ok(ToolOutcome::Ok(json!({}))));
    let url = serve(recorder.clone()).await;
    let mut raw = RunServiceClient::connect(url).await.unwrap();
    let caller = Some(wire::Caller {
        organization: "acme".into(),
        operator: false,
        kind: Some(wire::caller::Kind::Agent(wire::Agent { id: "a".into() })),
    });
    let start = |mode: i32, inputs: &[u8]| {
        Some(wire::execute_request::Write::StartRun(wire::StartRun {
            process: "p".into(),
            version: None,
            inputs: inputs.to_vec(),
            mode,
        }))
    };
    let cases = [
        (None, start(1, b"{}"), "the caller is missing"),
        (caller.clone(), None, "the write is missing"),
        (caller.clone(), start(0, b"{}"), "mode 0"),
        (caller.clone(), start(1, b"{not json"), "not JSON"),
        (
            caller.clone(),
            Some(wire::execute_request::Write::SendEvent(wire::SendEvent {
                run_id: "r_1".into(),
                name: "e".into(),
                data: Some(b"[1, 2]".to_vec()),
            })),
            "not a JSON object",
        ),
        (
            caller.clone(),
            Some(wire::execute_request::Write::Decide(wire::Decide {
                run_id: "r_1".into(),
                decision: 17,
                ..wire::Decide::default()
            })),
            "decision 17",
        ),
    ];
    for (caller, write, says) in cases {
        let status = raw
            .execute(wire::ExecuteRequest {
                caller,
                request_id: "x".into(),
                write,
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains(says), "{says}: {status:?}");
    }
    assert!(recorder.seen.lock().unwrap().is_empty());
}

const PROCESS: &str = "---\nname: intake\ndescription: Take a request in.\ninputs:\n  ticket: string\nsteps:\n  - id: triage\n    agent: Read the ticket and say what it needs.\n    output:\n      needs: string\n  - id: done\n    finish: done\n---\n\n# Intake\n\nRead the ticket.\n";

/// The real runtime behind gRPC: a run starts, is claimed and submitted through the client;
/// a lost response's retry gets the original result byte for byte, and the `requestId` reused
/// with other arguments is a `conflict` (spec §4), across the wire as in process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_walks_through_the_real_runtime_over_grpc_and_replays_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = Runtime::new(
        Arc::new(EmbeddedStore::in_memory(EmbeddedOptions::default())),
        Arc::new(LocalBlobs::new(dir.path())),
        RuntimeConfig::default(),
        Clock::system(),
    );
    runtime
        .publish(&OrgId::from("acme"), PROCESS.as_bytes(), Default::default())
        .await
        .unwrap();
    let service = client(&serve(Arc::new(runtime)).await);
    let caller = agent();
    // Answers come off the wire as values.
    let ok = |outcome: ToolOutcome| match outcome {
        ToolOutcome::Ok(data) => data,
        other => panic!("not data: {other:?}"),
    };

    let start = Write::StartRun {
        process: "intake".into(),
        version: None,
        inputs: json!({ "ticket": "T-1" }),
        mode: Mode::Live,
    };
    let started = ok(service.execute(&caller, start, "s-1").await.unwrap());
    let run_id = RunId::from(started["run"]["id"].as_str().unwrap());
    let claim = Write::Claim {
        run_id: run_id.clone(),
        step: StepId::from_wire("triage"),
    };
    let claimed = ok(service.execute(&caller, claim, "c-1").await.unwrap());
    let submit = |summary: &str| Write::Submit {
        token: claimed["token"].as_str().unwrap().into(),
        submission: Submission {
            output: Some(object(json!({ "needs": "a refund" }))),
            summary: Some(summary.into()),
            ..Submission::default()
        },
    };
    let submitted = ok(service
        .execute(&caller, submit("Needs a refund."), "u-1")
        .await
        .unwrap());
    assert_eq!(submitted["run"]["state"], "ended", "{submitted}");
    assert_eq!(submitted["run"]["outcome"], "done", "{submitted}");

    let replayed = ok(service
        .execute(&caller, submit("Needs a refund."), "u-1")
        .await
        .unwrap());
    assert_eq!(replayed.to_string(), submitted.to_string());
    let ToolOutcome::Refused(conflict) = service.execute(&caller, submit("Other."), "u-1").await.unwrap()
    else {
        panic!("a reused requestId with other arguments must be refused")
    };
    assert_eq!(conflict.code, ErrorCode::Conflict);

    let read = ok(service.get_run(&caller, &run_id).await.unwrap());
    assert_eq!(read["run"]["id"], run_id.as_str());
    let ToolOutcome::Refused(not_found) = service.get_run(&caller, &"r_nothing".into()).await.unwrap() else {
        panic!("an unknown run must be refused")
    };
    assert_eq!(not_found.code, ErrorCode::NotFound);
}

/// W3C Trace Context over gRPC (architecture, "Observability"): a call made while serving a
/// traced call carries its `traceparent`, and the host runs the call in that trace, under a span
/// of its own (the gRPC hop), whose id it passes on; a call made outside any trace carries none.
#[tokio::test]
async fn the_callers_trace_context_reaches_the_host() {
    let recorder = Recorder::answering(Ok(ToolOutcome::Ok(json!({}))));
    let service = client(&serve(recorder.clone()).await);
    let traced = TraceParent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").unwrap();
    trace::scope(traced, service.get_run(&agent(), &"r_1".into()))
        .await
        .unwrap();
    trace::scope(traced, service.fire_timer(&"acme".into(), &"r_1".into(), "t"))
        .await
        .unwrap();
    service.get_run(&agent(), &"r_2".into()).await.unwrap();
    let seen = recorder.traces.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    for host_trace in seen[..2].iter() {
        let host_trace = host_trace.expect("a traced call runs in a trace on the host");
        assert_eq!(host_trace.trace_id(), traced.trace_id(), "the caller's trace");
        assert_ne!(
            host_trace.span_id(),
            traced.span_id(),
            "the host's own span, not the caller's"
        );
        assert_eq!(host_trace.sampled(), traced.sampled());
    }
    assert_ne!(seen[0], seen[1], "each call is its own span on the host");
    assert_eq!(seen[2], None);
}

/// Mutual TLS between roles: `RoleTls` from the test CA's PEM files.
fn role_tls(ca: &std::path::Path, cert: &std::path::Path, key: &std::path::Path) -> RoleTls {
    let read = |path: &std::path::Path| std::fs::read(path).unwrap();
    RoleTls::new(read(ca), read(cert), read(key), None).expect("usable TLS material")
}

/// Serves `service` on a loopback port with `tls`; its `https://` URL.
async fn serve_tls(service: Arc<dyn RunService>, tls: &RoleTls) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    tokio::spawn(
        tonic::transport::Server::builder()
            .tls_config(tls.server_config())
            .unwrap()
            .add_service(run_service_server(service, DEFAULT_MAX_MESSAGE_BYTES))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    url
}

fn tls_client(url: &str, tls: Option<RoleTls>) -> Result<GrpcRunService, agentprocess_proto::BadUrl> {
    GrpcRunService::new(
        url,
        &ClientOptions {
            tls,
            ..ClientOptions::default()
        },
    )
}

/// Architecture, "gRPC between roles" (the caller's identity travels as typed fields, so the
/// channel itself must be trusted): with TLS between roles an actor host answers a caller whose
/// certificate the cluster's CA signed, and nobody else reaches its service: not a caller
/// without a certificate, not one whose certificate another CA signed, not plain HTTP/2; and a
/// caller refuses a host whose certificate its CA did not sign.
#[tokio::test]
async fn with_tls_between_roles_only_callers_the_ca_signed_reach_an_actor_host() {
    let dir = tempfile::tempdir().unwrap();
    let pki = agentprocess_testkit::TestPki::generate(dir.path());
    let recorder = Recorder::answering(Ok(ToolOutcome::Ok(json!({ "run": "seen" }))));
    let host = role_tls(&pki.ca_cert, &pki.server_cert, &pki.server_key);
    let url = serve_tls(recorder.clone(), &host).await;
    let run: RunId = "r_1".into();

    let trusted = tls_client(
        &url,
        Some(role_tls(&pki.ca_cert, &pki.client_cert, &pki.client_key)),
    )
    .unwrap();
    let answer = trusted.get_run(&agent(), &run).await.unwrap();
    assert_eq!(answer, ToolOutcome::Ok(json!({ "run": "seen" })));
    assert_eq!(recorder.seen.lock().unwrap().len(), 1);

    let stranger = tls_client(
        &url,
        Some(role_tls(&pki.ca_cert, &pki.stranger_cert, &pki.stranger_key)),
    )
    .unwrap();
    let refused = stranger.get_run(&agent(), &run).await;
    assert!(
        matches!(&refused, Err(ServiceError::Unavailable(why)) if why.contains("UnknownCA")),
        "{refused:?}"
    );

    // Trusts the CA but shows no certificate.
    let anonymous = tonic::transport::Endpoint::from_shared(url.clone())
        .unwrap()
        .tls_config(tonic::transport::ClientTlsConfig::new().ca_certificate(
            tonic::transport::Certificate::from_pem(std::fs::read(&pki.ca_cert).unwrap()),
        ))
        .unwrap();
    let mut raw = RunServiceClient::new(anonymous.connect_lazy());
    let refused = raw
        .get_run(wire::GetRunRequest {
            caller: Some(wire::Caller {
                organization: "acme".into(),
                operator: false,
                kind: Some(wire::caller::Kind::Agent(wire::Agent { id: "a".into() })),
            }),
            run_id: run.to_string(),
        })
        .await;
    let status = refused.expect_err("a caller without a certificate was answered");
    assert!(
        format!("{status:?}").contains("CertificateRequired"),
        "{status:?}"
    );

    let plain = url.replace("https://", "http://");
    let refused = tls_client(&plain, None).unwrap().get_run(&agent(), &run).await;
    assert!(
        matches!(&refused, Err(ServiceError::Unavailable(_))),
        "{refused:?}"
    );

    // A caller that trusts another CA does not talk to this host.
    let misled = tls_client(
        &url,
        Some(role_tls(&pki.stranger_ca_cert, &pki.client_cert, &pki.client_key)),
    )
    .unwrap();
    let refused = misled.get_run(&agent(), &run).await;
    assert!(
        matches!(&refused, Err(ServiceError::Unavailable(why)) if why.contains("UnknownIssuer")),
        "{refused:?}"
    );

    assert_eq!(
        recorder.seen.lock().unwrap().len(),
        1,
        "only the trusted caller reached the service"
    );
}

/// A URL's scheme must match whether TLS between roles is on, and unusable TLS material is
/// refused when it is read, each with the reason.
#[tokio::test]
async fn tls_between_roles_is_checked_before_any_call() {
    let dir = tempfile::tempdir().unwrap();
    let pki = agentprocess_testkit::TestPki::generate(dir.path());
    let tls = role_tls(&pki.ca_cert, &pki.client_cert, &pki.client_key);
    let error = tls_client("http://127.0.0.1:1", Some(tls)).unwrap_err();
    assert!(
        error.to_string().contains("must be reached at https://"),
        "{error}"
    );
    let error = tls_client("https://127.0.0.1:1", None).unwrap_err();
    assert!(error.to_string().contains("cluster.grpc_ca_file"), "{error}");

    let ca = std::fs::read(&pki.ca_cert).unwrap();
    let cert = std::fs::read(&pki.client_cert).unwrap();
    let key = std::fs::read(&pki.client_key).unwrap();
    let error = RoleTls::new(b"not a certificate".to_vec(), cert.clone(), key.clone(), None).unwrap_err();
    assert!(
        error.to_string().contains("CA certificate is not a PEM"),
        "{error}"
    );
    let error = RoleTls::new(ca.clone(), cert.clone(), cert.clone(), None).unwrap_err();
    assert!(
        error.to_string().contains("key is not a PEM private key"),
        "{error}"
    );
    let error = RoleTls::new(ca, key.clone(), key, None).unwrap_err();
    assert!(error.to_string().contains("certificate is not a PEM"), "{error}");
}
