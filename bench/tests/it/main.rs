//! `quire-bench` runs end to end at a small N against real PostgreSQL and Redis started by
//! scripts/test: it starts its own dispatcher, two worker processes and, for the upload
//! run, an API process (the binaries scripts/test builds beside it); every job of both
//! workloads ends SUCCEEDED and every upload is answered 201. Its timings are printed,
//! never asserted (docs/benchmarks.md holds the measured numbers).

use quire_shared::test_support::TestContext;
use serde_json::Value;

/// Runs `quire-bench` with `args` in the test's environment and `extra`; its standard
/// output, once it exited 0 (`what` names the run in the failure).
async fn run_bench(
    context: &TestContext,
    args: &[&str],
    extra: &[(&str, String)],
    what: &str,
) -> String {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_quire-bench"))
        .args(args)
        .envs(context.process_env())
        .envs(extra.iter().map(|(name, value)| (*name, value.as_str())))
        .output()
        .await
        .expect("run quire-bench");
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "bench {what} failed: {err}\n{out}");
    out
}

/// The JSON report a bench prints first.
fn first_report(out: &str) -> Value {
    serde_json::from_str(out.lines().next().unwrap_or_default())
        .unwrap_or_else(|_| panic!("a JSON line first: {out}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_benchmark_runs_both_workloads_and_every_job_succeeds() {
    let context = TestContext::new().await;
    for workload in ["noop", "integrity"] {
        let out = run_bench(
            &context,
            &[
                "--workload",
                workload,
                "--jobs",
                "40",
                "--rate",
                "20",
                "--seconds",
                "1",
                "--slots",
                "4",
                "--file-size",
                "4096",
                "--workers",
                "2",
                "--uploads",
                "10",
                "--upload-clients",
                "4",
            ],
            &[],
            workload,
        )
        .await;
        let report = first_report(&out);
        assert_eq!(report["workload"], workload);
        assert_eq!(report["succeeded"], 40, "{report}");
        assert_eq!(report["steady"]["succeeded"], 20, "{report}");
        assert_eq!(report["workers"], 2, "{report}");
        for key in [
            "enqueue_jobs_per_second",
            "http_uploads_per_second",
            "drain_jobs_per_second",
            "db_commits_per_job",
        ] {
            assert!(
                report[key].as_f64().is_some_and(|v| v > 0.0),
                "{key}: {report}"
            );
        }
        assert!(out.contains("drain (jobs/s)"), "and a table: {out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fairness_scenario_runs_each_tenant_alone_and_together_and_every_job_succeeds() {
    let context = TestContext::new().await;
    let out = run_bench(
        &context,
        &[
            "--scenario",
            "fairness",
            "--fairness-backlog",
            "60",
            "--fairness-uploads",
            "4",
            "--fairness-rate",
            "20",
            "--slots",
            "4",
            "--file-size",
            "4096",
            "--workers",
            "1",
        ],
        &[],
        "fairness",
    )
    .await;
    let report = first_report(&out);
    assert_eq!(report["scenario"], "fairness");
    for round in ["b_alone", "b_with_a"] {
        assert_eq!(report[round]["succeeded"], 4, "{report}");
        assert!(
            report[round]["commit_to_finish_ms"]["p99"]
                .as_f64()
                .is_some_and(|v| v > 0.0),
            "{round}: {report}"
        );
    }
    for round in ["a_alone", "a_with_b"] {
        assert_eq!(report[round]["succeeded"], 60, "{report}");
        assert!(
            report[round]["drain_jobs_per_second"]
                .as_f64()
                .is_some_and(|v| v > 0.0),
            "{round}: {report}"
        );
    }
    for key in ["b_p99_ratio", "b_p99_target_ms", "a_drain_ratio"] {
        assert!(
            report[key].as_f64().is_some_and(|v| v > 0.0),
            "{key}: {report}"
        );
    }
    assert!(report["b_meets_target"].is_boolean(), "{report}");
    assert!(out.contains("B's p99 with A / alone"), "and a table: {out}");
}

/// The reads scenario measures both reads idle and loaded: every read answered 200, the
/// search finding the seeded invoices (the bench checks it before it measures), and the
/// load really running beside the loaded window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reads_scenario_measures_both_reads_idle_and_beside_the_load() {
    let context = TestContext::new().await;
    let out = run_bench(
        &context,
        &[
            "--scenario",
            "reads",
            "--reads-documents",
            "120",
            "--reads-backlog",
            "400",
            "--reads-rate",
            "10",
            "--seconds",
            "1",
            "--slots",
            "4",
            "--file-size",
            "4096",
            "--upload-clients",
            "2",
        ],
        &[],
        "reads",
    )
    .await;
    let report = first_report(&out);
    assert_eq!(report["scenario"], "reads");
    for window in ["list_idle", "list_loaded", "search_idle", "search_loaded"] {
        assert_eq!(report[window]["failed"], 0, "{window}: {report}");
        assert!(
            report[window]["requests"].as_u64().is_some_and(|n| n >= 5),
            "{window}: {report}"
        );
        assert!(
            report[window]["p99_ms"].as_f64().is_some_and(|v| v > 0.0),
            "{window}: {report}"
        );
    }
    assert!(
        report["load"]["c_uploads_per_second"]
            .as_f64()
            .is_some_and(|v| v > 0.0),
        "the uploads ran beside the loaded reads: {report}"
    );
    assert!(
        out.contains("search p50 / p99 ms: loaded"),
        "and a table: {out}"
    );
}

/// The scale scenario at a small size: the runs on the empty database and beside the
/// written history, and the backlog's drain, every job SUCCEEDED; the history holds as
/// many jobs and events as asked, and the backlog's drain is reported tenth by tenth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scale_scenario_runs_empty_beside_history_and_a_backlog_and_every_job_succeeds() {
    let context = TestContext::new().await;
    let out = run_bench(
        &context,
        &[
            "--scenario",
            "scale",
            "--history-jobs",
            "3000",
            "--history-tenants",
            "3",
            "--backlog",
            "300",
            "--jobs",
            "40",
            "--rate",
            "20",
            "--seconds",
            "1",
            "--slots",
            "4",
        ],
        &[],
        "scale",
    )
    .await;
    let report = first_report(&out);
    assert_eq!(report["scenario"], "scale");
    assert_eq!(report["empty"]["succeeded"], 40, "{report}");
    assert_eq!(report["history"]["run"]["succeeded"], 40, "{report}");
    assert_eq!(
        report["history"]["run"]["steady"]["succeeded"], 20,
        "{report}"
    );
    assert_eq!(report["history"]["jobs"], 3000, "{report}");
    assert_eq!(report["history"]["events"], 6000, "{report}");
    assert_eq!(report["backlog"]["succeeded"], 300, "{report}");
    let tenths = report["backlog"]["tenth_jobs_per_second"]
        .as_array()
        .expect("tenths");
    assert_eq!(tenths.len(), 10, "{report}");
    for key in ["enqueue_ratio", "drain_ratio", "backlog_drain_ratio"] {
        assert!(
            report[key].as_f64().is_some_and(|v| v > 0.0),
            "{key}: {report}"
        );
    }
    assert!(out.contains("each tenth (jobs/s)"), "and a table: {out}");
}

/// One invocation measures the integrity workload (and HTTP uploads) on local storage and
/// on S3 and prints both, each from its own JSON line. It needs the SeaweedFS that
/// scripts/test starts for the S3 backend (`QUIRE_TEST_S3_*`); before that backend's
/// scripts are in, there is no S3 server to run on and the test has nothing to check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_invocation_measures_local_storage_and_s3_side_by_side() {
    let Ok(endpoint) = std::env::var("QUIRE_TEST_S3_ENDPOINT") else {
        return;
    };
    let variable = |name: &str| std::env::var(name).unwrap_or_default();
    let context = TestContext::new().await;
    let prefix = format!("bench-{}", uuid::Uuid::new_v4().simple());
    let s3 = [
        ("QUIRE__STORAGE__S3__ENDPOINT", endpoint),
        (
            "QUIRE__STORAGE__S3__BUCKET",
            variable("QUIRE_TEST_S3_BUCKET"),
        ),
        ("QUIRE__STORAGE__S3__PATH_STYLE", "true".to_owned()),
        (
            "QUIRE__STORAGE__S3__ACCESS_KEY_ID",
            variable("QUIRE_TEST_S3_ACCESS_KEY_ID"),
        ),
        (
            "QUIRE__STORAGE__S3__SECRET_ACCESS_KEY",
            variable("QUIRE_TEST_S3_SECRET_ACCESS_KEY"),
        ),
        ("QUIRE__STORAGE__S3__PREFIX", prefix),
    ];
    let out = run_bench(
        &context,
        &[
            "--workload",
            "integrity",
            "--storage",
            "local,s3",
            "--jobs",
            "20",
            "--rate",
            "10",
            "--seconds",
            "1",
            "--slots",
            "4",
            "--file-size",
            "4096",
            "--uploads",
            "5",
            "--upload-clients",
            "2",
        ],
        &s3,
        "storage",
    )
    .await;
    let reports: Vec<Value> = out
        .lines()
        .take(2)
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("JSON lines: {out}")))
        .collect();
    for (report, storage) in reports.iter().zip(["local", "s3"]) {
        assert_eq!(report["storage"], storage, "{report}");
        assert_eq!(report["succeeded"], 20, "{report}");
        assert!(
            report["http_uploads_per_second"]
                .as_f64()
                .is_some_and(|v| v > 0.0),
            "{report}"
        );
    }
    assert!(
        out.contains("storage local / s3"),
        "and side by side: {out}"
    );
}

/// The analyze workload on the two quickest files of its corpus (no OCR): the pipeline's
/// tool runs are recorded and run by hand, Quire analyzes as many documents, at 1 slot
/// and at the machine's cores, and the report holds both and the overhead of each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_analyze_workload_measures_quire_against_its_tools_by_hand() {
    let context = TestContext::new().await;
    let out = run_bench(
        &context,
        &[
            "--workload",
            "analyze",
            "--corpus-files",
            "text-pdf-1,plain-text",
            "--corpus-sets",
            "1",
        ],
        &[],
        "analyze",
    )
    .await;
    let report = first_report(&out);
    assert_eq!(report["workload"], "analyze");
    let passes = report["passes"].as_array().expect("passes");
    let cores = report["cores"].as_u64().expect("cores");
    let concurrencies = if cores > 1 { 2 } else { 1 };
    assert_eq!(passes.len(), 2 * concurrencies, "{report}");
    for pass in passes {
        let slots = pass["slots"].as_u64().expect("slots");
        assert!(slots == 1 || slots == cores, "{pass}");
        assert_eq!(pass["documents"], 2 * slots, "{pass}");
        assert_eq!(pass["pages"], 2 * slots, "{pass}");
        assert_eq!(pass["failed_runs"], 0, "{pass}");
        for key in ["wall_seconds", "pages_per_second", "cpu_seconds_per_page"] {
            assert!(pass[key].as_f64().is_some_and(|v| v > 0.0), "{key}: {pass}");
        }
    }
    let overheads = report["overhead"].as_array().expect("overheads");
    assert_eq!(overheads.len(), concurrencies, "{report}");
    assert!(
        overheads
            .iter()
            .all(|overhead| overhead["met"].is_boolean())
    );
    assert!(out.contains("overhead at 1 slot(s)"), "and a table: {out}");
}
