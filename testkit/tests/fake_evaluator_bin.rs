//! The `fake-evaluator` binary as another process would use it: it prints its base URL first and
//! answers chat completions there.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

/// Kills the fake when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// POSTs `body` to `{base_url}/chat/completions` over plain HTTP/1.1; returns status and body.
fn post(base_url: &str, authorization: Option<&str>, body: &Value) -> (u16, String) {
    let rest = base_url.strip_prefix("http://").expect("an http URL");
    let (address, prefix) = rest.split_once('/').expect("a path");
    let body = body.to_string();
    let mut stream = TcpStream::connect(address).expect("the fake listens");
    let mut request = format!(
        "POST /{prefix}/chat/completions HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(authorization) = authorization {
        request.push_str(&format!("Authorization: {authorization}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, body.to_owned())
}

#[test]
fn the_binary_prints_its_url_and_answers_there() {
    let child = Command::new(env!("CARGO_BIN_EXE_fake-evaluator"))
        .args(["--api-key", "sk-bin"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("the fake starts");
    let mut running = Running(child);
    let mut first = String::new();
    BufReader::new(running.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let base_url = first.trim();
    assert!(
        base_url.starts_with("http://127.0.0.1:") && base_url.ends_with("/v1"),
        "{base_url}"
    );

    let document = json!({ "submission": { "summary": "[check:fail]" }, "answers": { "yes": "", "no": "" } });
    let request = json!({
        "model": "judge", "logprobs": true, "top_logprobs": 5, "max_tokens": 1,
        "messages": [{ "role": "user", "content": document.to_string() }],
    });
    let (status, body) = post(base_url, Some("Bearer sk-bin"), &request);
    assert_eq!(status, 200, "{body}");
    let completion: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(completion["model"], "fake-evaluator-1");
    assert_eq!(completion["choices"][0]["message"]["content"], "No");
    let first_token = &completion["choices"][0]["logprobs"]["content"][0];
    assert_eq!(first_token["token"], "No");
    assert_eq!(first_token["top_logprobs"].as_array().unwrap().len(), 4);

    let (status, body) = post(base_url, Some("Bearer wrong"), &request);
    assert_eq!(status, 401, "{body}");
    let (status, _) = post(
        base_url,
        Some("Bearer sk-bin"),
        &json!({ "model": "judge", "messages": [] }),
    );
    assert_eq!(status, 400);
}
