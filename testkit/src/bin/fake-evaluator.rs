//! `fake-evaluator [--port N] [--api-key KEY]`: the fake `check-1` evaluator as a process of its
//! own. Prints its base URL (`http://127.0.0.1:<port>/v1`) on stdout's first line, then serves
//! until killed.

use agentprocess_testkit::FakeEvaluator;
use std::io::Write;
use std::process::ExitCode;

const USAGE: &str = "usage: fake-evaluator [--port N] [--api-key KEY]";

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let (port, api_key) = match arguments(std::env::args().skip(1)) {
        Ok(parsed) => parsed,
        Err(problem) => {
            eprintln!("fake-evaluator: {problem}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("fake-evaluator: cannot listen on 127.0.0.1:{port}: {error}");
            return ExitCode::FAILURE;
        }
    };
    let fake = FakeEvaluator::serve(listener, api_key);
    let mut stdout = std::io::stdout();
    if writeln!(stdout, "{}", fake.base_url)
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    let _ = tokio::signal::ctrl_c().await;
    ExitCode::SUCCESS
}

fn arguments(mut args: impl Iterator<Item = String>) -> Result<(u16, Option<String>), String> {
    let (mut port, mut api_key) = (0, None);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--port" => {
                port = value
                    .parse()
                    .map_err(|_| format!("--port {value:?} is not a port"))?
            }
            "--api-key" => api_key = Some(value),
            _ => return Err(format!("unknown argument {flag:?}")),
        }
    }
    Ok((port, api_key))
}
