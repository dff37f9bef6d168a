//! The API as its clients' tools meet it, against the real binaries (an api, a dispatcher
//! and a worker as child processes, as the fault suite starts them) on the real
//! PostgreSQL and Redis:
//!
//! - Schemathesis fuzzes every operation of the served `/api/openapi.json` with every
//!   check and every phase, the stateful one following the document's links (upload →
//!   the document, its jobs, retry, trash, restore), and must find nothing.
//! - openapi-python-client generates a Python client from the same served document, and
//!   `api/tests/contract/walkthrough.py` runs the README's walk-through with it; a field
//!   the document mis-describes fails it.
//!
//! The tools come from the venv `scripts/test` installs (`ensure_contract_tools` in
//! scripts/lib/services.sh) and names in `QUIRE_TEST_CONTRACT_TOOLS`. Both tests print the
//! tool's whole output when they fail: its summary names each fault and how to replay it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use quire_shared::test_support::{TestContext, required_env};

use crate::faults::stack::Stack;

/// Test cases per operation and phase: enough to find what a property-based tester
/// finds in a long run (each fault class shows up within a few examples), small enough
/// that the whole run stays within a couple of minutes on two cores.
const MAX_EXAMPLES: &str = "12";

/// A fixed seed makes a failure reproducible in CI and locally;
/// `QUIRE_CONTRACT_SEED=<n>` explores another part of the input space.
const DEFAULT_SEED: &str = "17";

fn tool(name: &str) -> PathBuf {
    Path::new(&required_env("QUIRE_TEST_CONTRACT_TOOLS")).join(name)
}

/// `PATH` with the tools' venv first.
fn tools_path() -> std::ffi::OsString {
    let mut paths = vec![PathBuf::from(required_env("QUIRE_TEST_CONTRACT_TOOLS"))];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).expect("a PATH")
}

fn contract_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/contract")
}

/// The stack the contract runs against: an api, a dispatcher and a worker, so documents
/// really become `READY` (or `FAILED`, which the retry link needs), with a provisioned
/// tenant whose owner's token the tools send.
async fn contract_stack() -> Stack {
    let mut stack = Stack::new(TestContext::new().await).await;
    // The event stream is endless by design; closed after a few seconds, each request
    // the tools make of it ends well within their request timeout.
    stack.spawn("api", &[("QUIRE__EVENTS__MAX_STREAM_SECONDS", "3")]);
    stack.spawn("dispatcher-1", &[]);
    stack.spawn("worker-1", &[]);
    stack.wait_until_ready().await;
    stack
}

/// Runs `command` to its end and answers (success, stdout and stderr together).
async fn run(command: &mut tokio::process::Command) -> (bool, String) {
    let output = command
        .kill_on_drop(true)
        .output()
        .await
        .unwrap_or_else(|error| panic!("failed to run {command:?}: {error}"));
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

/// What Schemathesis's summary says of the test cases ("334 generated, …"), found on
/// the line after its `Test cases:` heading.
fn test_case_count(output: &str) -> String {
    let mut lines = output.lines();
    lines
        .find(|line| line.trim_start().starts_with("Test cases:"))
        .and_then(|_| lines.next())
        .map(|line| line.trim().to_owned())
        .unwrap_or_else(|| "no test case count in the output".to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_fault_in_the_served_openapi_document() {
    // The run loads both cores, as the fault scenarios do: one heavy test at a time.
    let _serial = crate::faults::one_at_a_time().await;
    let stack = contract_stack().await;
    let base = format!("http://127.0.0.1:{}", stack.api_port);
    let seed = std::env::var("QUIRE_CONTRACT_SEED").unwrap_or_else(|_| DEFAULT_SEED.into());
    let work = tempfile::tempdir().expect("a work folder");
    let started = Instant::now();
    let (passed, output) = run(tokio::process::Command::new(tool("st"))
        .current_dir(work.path())
        // Files that can only be valid when their bytes are of an accepted type.
        .env("SCHEMATHESIS_HOOKS", contract_dir().join("hooks.py"))
        // The answers that depend on the server's state, per operation (the file says why).
        .arg("--config-file")
        .arg(contract_dir().join("schemathesis.toml"))
        .arg("run")
        .arg(format!("{base}/api/openapi.json"))
        .args(["--checks", "all"])
        .args(["--phases", "examples,coverage,fuzzing,stateful"])
        .args(["--max-examples", MAX_EXAMPLES])
        .args(["--seed", &seed])
        .args([
            "--header",
            &format!("Authorization: Bearer {}", stack.token),
        ])
        .args(["--request-timeout", "20"])
        .args(["--generation-database", "none"])
        // One worker thread: with two, CPython 3.11's parser, which Hypothesis calls to
        // describe its filters, failed with "AST constructor recursion depth mismatch"
        // (a thread-safety bug of CPython's AST constructor, fixed in later releases).
        .args(["--workers", "1"])
        .arg("--no-color"))
    .await;
    println!("{output}");
    println!(
        "schemathesis ran in {:.0?} with seed {seed}; test cases: {}",
        started.elapsed(),
        test_case_count(&output)
    );
    assert!(
        passed,
        "schemathesis found faults (its summary is above; replay with QUIRE_CONTRACT_SEED={seed})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_generated_from_the_document_runs_the_readme_walkthrough() {
    let stack = contract_stack().await;
    let base = format!("http://127.0.0.1:{}", stack.api_port);
    let work = tempfile::tempdir().expect("a work folder");
    let document = reqwest::get(format!("{base}/api/openapi.json"))
        .await
        .expect("fetch the openapi document")
        .text()
        .await
        .expect("the document");
    let document_path = work.path().join("openapi.json");
    std::fs::write(&document_path, document).expect("write the document");
    let package = work.path().join("client");
    let started = Instant::now();
    // A warning is a part of the document the generator could not turn into code: the
    // client would lack it, so it fails the test too.
    let (generated, output) = run(tokio::process::Command::new(tool("openapi-python-client"))
        .current_dir(work.path())
        // It formats what it generates with ruff, from the same venv.
        .env("PATH", tools_path())
        .arg("generate")
        .arg("--config")
        .arg(contract_dir().join("client.yaml"))
        .arg("--path")
        .arg(&document_path)
        .arg("--output-path")
        .arg(package.join("quire_client"))
        .args(["--meta", "none", "--fail-on-warning"]))
    .await;
    assert!(
        generated,
        "openapi-python-client could not generate a client from the document:\n{output}"
    );
    let (walked, output) = run(tokio::process::Command::new(tool("python"))
        .current_dir(work.path())
        .env("PYTHONPATH", &package)
        .arg(contract_dir().join("walkthrough.py"))
        .args(["--base-url", &base, "--token", &stack.token]))
    .await;
    println!("{output}");
    println!(
        "generated the client and walked through in {:.0?}",
        started.elapsed()
    );
    assert!(
        walked,
        "the walk-through failed with the generated client (above)"
    );
}
