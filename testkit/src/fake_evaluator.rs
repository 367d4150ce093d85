//! A fake `check-1` evaluator: a real OpenAI-compatible chat-completions server on 127.0.0.1
//! whose answers are decided by markers in the submission, so tests can reach every verdict.
//!
//! # Running it
//!
//! - In a test's tokio runtime: [`FakeEvaluator::spawn`] (or [`FakeEvaluator::spawn_with`] to
//!   require an API key). The server stops when the [`FakeEvaluator`] is dropped.
//! - Beside a server process: [`FakeEvaluator::spawn_on_thread`] runs it on a thread of its own
//!   with its own runtime, so a test that starts the server binary needs no runtime of its own;
//!   or the `fake-evaluator` binary of this crate (`fake-evaluator [--port N] [--api-key KEY]`)
//!   prints its base URL on stdout's first line and serves until killed.
//!
//! [`FakeEvaluator::base_url`] is the `url` an evaluator client is configured with
//! (`http://127.0.0.1:<port>/v1`); requests go to `POST /v1/chat/completions`.
//!
//! # What it answers
//!
//! It reads the request the way the gateway's client writes it: the last user message is a JSON
//! document whose `submission` is searched for markers and whose `answers` keys are the labels
//! (`yes`/`no` for a yes/no question, letters for a choice, digits for a rubric's levels, worst
//! first). When the message is not such a document, the whole text of the user messages is
//! searched and the question is taken as yes/no.
//!
//! | Marker in the submission | Answer |
//! |---|---|
//! | `[check:error]` | HTTP 500 with an OpenAI error body |
//! | `[check:garbage]` | HTTP 200 with a body that is not JSON |
//! | `[check:no-logprobs]` | the passing answer's text with `logprobs: null` |
//! | `[check:slow]` | waits [`FakeEvaluator::SLOW`], then answers as without it |
//! | `[check:fail]` | yes/no: yes 0.02. Choice: the SECOND option with 0.95. Rubric: level 0 with 0.95 |
//! | `[check:unsure]` | yes/no: yes 0.7. Choice: the first option with 0.3. Rubric: the top level with 0.3 |
//! | none | yes/no: yes 0.98. Choice: the FIRST option with 0.95. Rubric: the top level with 0.95 |
//!
//! Earlier rows win. How the run machine reads these (`machine/check.rs`):
//!
//! - yes/no passes at or above `pass` (default 0.9). Below it, it is unsure when the question has
//!   a `fail` threshold and the probability is at or above it, else it fails. So 0.7 is unsure
//!   only on a question with a `fail` at or below 0.7 (the `partner-screening` example has 0.5;
//!   0.5 itself would sit exactly on that threshold), and fails on a question without `fail`.
//! - A choice is unsure below its confidence floor (default 0.8) or when the answer is in its
//!   `unsure` list; else it passes when the answer is in `pass`, else it fails. The fake assumes a
//!   process lists its passing option first and a failing one second, as `partner-screening`
//!   does.
//! - A rubric is unsure below its confidence floor; else it passes at or above its `pass` level.
//!   The top level passes and level 0 fails unless `pass` is 0.
//!
//! Probabilities are given as `logprobs` of one token, as a model would: yes/no mass split over
//! `Yes`/`yes` and `No`/`no`, a choice's or rubric's chosen label with the confidence's mass and
//! the rest spread thinly over the other labels and over tokens that are no label at all.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// One request as the fake received it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedRequest {
    /// The `Authorization` header, when there was one.
    pub authorization: Option<String>,
    /// The request body, `Null` when it was not JSON.
    pub body: Value,
}

#[derive(Debug, Default)]
struct Shared {
    api_key: Option<String>,
    requests: AtomicUsize,
    received: Mutex<Vec<ReceivedRequest>>,
}

/// A running fake evaluator. Dropping it stops the server.
#[derive(Debug)]
pub struct FakeEvaluator {
    /// `http://127.0.0.1:<port>/v1`.
    pub base_url: String,
    shared: Arc<Shared>,
    _stop: oneshot::Sender<()>,
}

impl FakeEvaluator {
    /// The `model` every answer names.
    pub const MODEL: &str = "fake-evaluator-1";
    /// How long a `[check:slow]` submission makes it wait.
    pub const SLOW: Duration = Duration::from_secs(10);

    /// Starts a fake that takes any or no API key, on the current tokio runtime.
    pub async fn spawn() -> FakeEvaluator {
        FakeEvaluator::spawn_with(None).await
    }

    /// Starts a fake on the current tokio runtime; with `api_key`, a request without
    /// `Authorization: Bearer <api_key>` gets HTTP 401.
    pub async fn spawn_with(api_key: Option<&str>) -> FakeEvaluator {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("the fake evaluator binds a loopback port");
        FakeEvaluator::serve(listener, api_key.map(str::to_owned))
    }

    /// Starts a fake on a thread of its own, with its own tokio runtime. For tests that have no
    /// runtime, or whose runtime must not serve it.
    pub fn spawn_on_thread(api_key: Option<&str>) -> FakeEvaluator {
        let api_key = api_key.map(str::to_owned);
        let (started, running) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("fake-evaluator".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("the fake evaluator's runtime starts");
                runtime.block_on(async move {
                    let listener = TcpListener::bind("127.0.0.1:0")
                        .await
                        .expect("the fake evaluator binds a loopback port");
                    let (stop, stopped) = oneshot::channel::<()>();
                    let fake = FakeEvaluator::serve(listener, api_key);
                    let shared = fake.shared.clone();
                    let base_url = fake.base_url.clone();
                    let _ = started.send((base_url, shared, stop));
                    let _ = stopped.await;
                    drop(fake);
                });
            })
            .expect("the fake evaluator's thread starts");
        let (base_url, shared, stop) = running.recv().expect("the fake evaluator starts");
        FakeEvaluator {
            base_url,
            shared,
            _stop: stop,
        }
    }

    /// Serves on `listener` (already bound) until the returned handle is dropped. Must be called
    /// inside a tokio runtime.
    pub fn serve(listener: TcpListener, api_key: Option<String>) -> FakeEvaluator {
        let address = listener.local_addr().expect("a bound listener has an address");
        let shared = Arc::new(Shared {
            api_key,
            ..Shared::default()
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .with_state(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        FakeEvaluator {
            base_url: format!("http://{address}/v1"),
            shared,
            _stop: stop,
        }
    }

    /// How many requests reached `/v1/chat/completions` so far, whatever they were answered.
    pub fn requests(&self) -> usize {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// Every request received so far, in arrival order.
    pub fn received(&self) -> Vec<ReceivedRequest> {
        self.shared
            .received
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

/// What a submission's markers ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    ServerError,
    Garbage,
    NoLogprobs,
    Fail,
    Unsure,
    Pass,
}

impl Behaviour {
    /// The behaviour for `text`, and whether it asked to be slow.
    fn of(text: &str) -> (Behaviour, bool) {
        let slow = text.contains("[check:slow]");
        let behaviour = if text.contains("[check:error]") {
            Behaviour::ServerError
        } else if text.contains("[check:garbage]") {
            Behaviour::Garbage
        } else if text.contains("[check:no-logprobs]") {
            Behaviour::NoLogprobs
        } else if text.contains("[check:fail]") {
            Behaviour::Fail
        } else if text.contains("[check:unsure]") {
            Behaviour::Unsure
        } else {
            Behaviour::Pass
        };
        (behaviour, slow)
    }
}

/// The kind of question, told from the answer labels.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Asked {
    YesNo,
    Choice(Vec<String>),
    Rubric(Vec<String>),
}

async fn chat_completions(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: String) -> Response {
    shared.requests.fetch_add(1, Ordering::SeqCst);
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let parsed: Option<Value> = serde_json::from_str(&body).ok();
    shared
        .received
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(ReceivedRequest {
            authorization: authorization.clone(),
            body: parsed.clone().unwrap_or(Value::Null),
        });
    if let Some(key) = &shared.api_key
        && authorization.as_deref() != Some(&format!("Bearer {key}"))
    {
        return openai_error(
            StatusCode::UNAUTHORIZED,
            "Incorrect API key provided.",
            "invalid_api_key",
        );
    }
    let Some(request) = parsed else {
        return openai_error(
            StatusCode::BAD_REQUEST,
            "The body is not JSON.",
            "invalid_request",
        );
    };
    if let Some(problem) = request_problem(&request) {
        return openai_error(StatusCode::BAD_REQUEST, &problem, "invalid_request");
    }
    let (submission, asked) = read_prompt(&request);
    let (behaviour, slow) = Behaviour::of(&submission);
    if slow {
        tokio::time::sleep(FakeEvaluator::SLOW).await;
    }
    match behaviour {
        Behaviour::ServerError => openai_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "The server had an error while processing your request.",
            "server_error",
        ),
        Behaviour::Garbage => (StatusCode::OK, "<html>upstream hiccup</html>").into_response(),
        Behaviour::NoLogprobs => {
            let (token, _) = answer(&asked, Behaviour::Pass)[0].clone();
            (StatusCode::OK, axum::Json(completion(&token, None))).into_response()
        }
        behaviour => {
            let tokens = answer(&asked, behaviour);
            let (token, _) = tokens[0].clone();
            (StatusCode::OK, axum::Json(completion(&token, Some(&tokens)))).into_response()
        }
    }
}

/// What a real endpoint would refuse in a request meant for a check: the evaluator client must
/// ask for one token with its alternatives.
fn request_problem(request: &Value) -> Option<String> {
    if !request["model"].is_string() {
        return Some("`model` is required.".into());
    }
    if request["messages"].as_array().is_none_or(|m| m.is_empty()) {
        return Some("`messages` must be a non-empty array.".into());
    }
    if request["logprobs"] != json!(true) || !request["top_logprobs"].is_u64() {
        return Some("This fake answers only requests with `logprobs: true` and `top_logprobs`.".into());
    }
    None
}

/// The submission's text and the question's kind, from the last user message.
fn read_prompt(request: &Value) -> (String, Asked) {
    let user: Vec<&str> = request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|message| message["role"] == "user")
        .filter_map(|message| message["content"].as_str())
        .collect();
    let document = user
        .last()
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
        .filter(|document| document.get("submission").is_some());
    let Some(document) = document else {
        return (user.join("\n"), Asked::YesNo);
    };
    let labels: Vec<String> = document["answers"]
        .as_object()
        .map(|answers| answers.keys().cloned().collect())
        .unwrap_or_default();
    let asked = if labels.is_empty() || labels.iter().any(|l| l.eq_ignore_ascii_case("yes")) {
        Asked::YesNo
    } else if labels.iter().all(|l| l.chars().all(|c| c.is_ascii_digit())) {
        Asked::Rubric(labels)
    } else {
        Asked::Choice(labels)
    };
    (document["submission"].to_string(), asked)
}

/// The first token's distribution for `behaviour`, most likely first: `(token, probability)`.
fn answer(asked: &Asked, behaviour: Behaviour) -> Vec<(String, f64)> {
    match asked {
        Asked::YesNo => {
            let yes: f64 = match behaviour {
                Behaviour::Fail => 0.02,
                Behaviour::Unsure => 0.7,
                _ => 0.98,
            };
            let no = 1.0 - yes;
            let mut tokens = vec![
                ("Yes".to_owned(), yes * 0.9),
                ("yes".to_owned(), yes * 0.1),
                ("No".to_owned(), no * 0.9),
                ("no".to_owned(), no * 0.1),
            ];
            tokens.sort_by(|a, b| b.1.total_cmp(&a.1));
            tokens
        }
        Asked::Choice(labels) | Asked::Rubric(labels) => {
            let is_rubric = matches!(asked, Asked::Rubric(_));
            let best = if is_rubric { labels.len() - 1 } else { 0 };
            let (chosen, confidence) = match behaviour {
                Behaviour::Fail if is_rubric => (0, 0.95),
                Behaviour::Fail => (1.min(labels.len() - 1), 0.95),
                Behaviour::Unsure => (best, 0.3),
                _ => (best, 0.95),
            };
            spread(labels, chosen, confidence)
        }
    }
}

/// `labels[chosen]` with `confidence`; the rest of the mass a quarter over the other labels and
/// three quarters over three tokens that are no label, so no other label comes near the chosen.
fn spread(labels: &[String], chosen: usize, confidence: f64) -> Vec<(String, f64)> {
    let rest = 1.0 - confidence;
    let others = labels.len().saturating_sub(1).max(1) as f64;
    let mut tokens = vec![(labels[chosen].clone(), confidence)];
    for (index, label) in labels.iter().enumerate() {
        if index != chosen {
            tokens.push((label.clone(), rest / 4.0 / others));
        }
    }
    for filler in ["The", "\n", "**"] {
        tokens.push((filler.to_owned(), rest * 0.25));
    }
    tokens
}

/// A chat completion whose one token is `token`, with `top` as its alternatives when given.
fn completion(token: &str, top: Option<&[(String, f64)]>) -> Value {
    let logprobs = top.map(|top| {
        let alternative = |(token, probability): &(String, f64)| {
            json!({ "token": token, "logprob": probability.ln(), "bytes": token.as_bytes() })
        };
        let first = top.iter().find(|(t, _)| t == token).map_or(0.0, |(_, p)| *p);
        json!({
            "content": [{
                "token": token,
                "logprob": first.ln(),
                "bytes": token.as_bytes(),
                "top_logprobs": top.iter().map(alternative).collect::<Vec<_>>(),
            }],
            "refusal": null,
        })
    });
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_790_812_800,
        "model": FakeEvaluator::MODEL,
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": token, "refusal": null },
            "logprobs": logprobs,
            "finish_reason": "length",
        }],
        "usage": { "prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2 },
    })
}

/// An error in OpenAI's shape: `{ "error": { message, type, code } }`.
fn openai_error(status: StatusCode, message: &str, code: &str) -> Response {
    let body = json!({ "error": { "message": message, "type": code, "param": null, "code": code } });
    (status, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn markers_decide_the_behaviour_and_earlier_rows_win() {
        assert_eq!(Behaviour::of("fine"), (Behaviour::Pass, false));
        assert_eq!(
            Behaviour::of("[check:fail] [check:unsure]"),
            (Behaviour::Fail, false)
        );
        assert_eq!(
            Behaviour::of("[check:unsure][check:slow]"),
            (Behaviour::Unsure, true)
        );
        assert_eq!(
            Behaviour::of("[check:fail][check:error]"),
            (Behaviour::ServerError, false)
        );
    }

    #[test]
    fn the_chosen_label_stays_the_most_likely_even_at_low_confidence() {
        for count in 2..=10 {
            let names: Vec<String> = (0..count).map(|i| i.to_string()).collect();
            for (behaviour, confidence) in [(Behaviour::Unsure, 0.3), (Behaviour::Pass, 0.95)] {
                let tokens = answer(&Asked::Rubric(names.clone()), behaviour);
                assert_eq!(tokens[0], (names[count - 1].clone(), confidence));
                assert!(tokens[1..].iter().all(|(_, p)| *p < confidence));
                let total: f64 = tokens.iter().map(|(_, p)| p).sum();
                assert!((total - 1.0).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn no_token_but_the_labels_reads_as_a_label_even_with_26_choices() {
        let letters: Vec<String> = ('A'..='Z').map(String::from).collect();
        let tokens = answer(&Asked::Choice(letters.clone()), Behaviour::Unsure);
        let label_tokens = tokens.iter().filter(|(t, _)| letters.contains(t)).count();
        assert_eq!(label_tokens, 26);
        assert_eq!(tokens[0], ("A".to_owned(), 0.3));
    }

    #[test]
    fn a_failing_choice_is_the_second_option_and_a_failing_rubric_level_zero() {
        let tokens = answer(&Asked::Choice(labels(&["A", "B", "C"])), Behaviour::Fail);
        assert_eq!(tokens[0], ("B".to_owned(), 0.95));
        let tokens = answer(&Asked::Rubric(labels(&["0", "1", "2"])), Behaviour::Fail);
        assert_eq!(tokens[0], ("0".to_owned(), 0.95));
    }

    #[test]
    fn the_prompt_document_gives_the_submission_and_the_labels() {
        let document = json!({
            "instructions": "[check:fail] in the instructions does not count",
            "submission": { "summary": "ok [check:unsure]" },
            "answers": { "A": "x", "B": "y" },
        });
        let request = json!({ "messages": [
            { "role": "system", "content": "judge" },
            { "role": "user", "content": document.to_string() },
        ]});
        let (text, asked) = read_prompt(&request);
        assert_eq!(Behaviour::of(&text).0, Behaviour::Unsure);
        assert_eq!(asked, Asked::Choice(labels(&["A", "B"])));
        let plain = json!({ "messages": [{ "role": "user", "content": "Is it [check:fail]?" }] });
        let (text, asked) = read_prompt(&plain);
        assert_eq!((Behaviour::of(&text).0, asked), (Behaviour::Fail, Asked::YesNo));
    }
}
