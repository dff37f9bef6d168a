//! The pipeline's tools run by hand: the baseline Quire's overhead is measured against.
//! The commands are not a list of the bench's own: each corpus file is analyzed once by
//! the pipeline itself, in this process and before any timing, and every tool run it asks
//! for is recorded (`tools::record`: program, arguments, current folder, environment).
//! By hand is then exactly those commands, one after the other per document as a job runs
//! them, without what Quire adds: no queue, no download and check of the stored file, no
//! in-process decoding, orientation copy, deskew or thumbnail scaling, no `prlimit`, no
//! bubblewrap, no write-back. A change to the pipeline's tools changes both sides.
//!
//! Each document by hand runs in a copy of its recorded work folder (copied before the
//! clock starts), so the files the pipeline made in process (the orientation copy, the
//! upright page) are there for the tools that read them. A replayed `pdftoppm` writes its
//! page images again over the upright ones; the corpus's scans are upright, so tesseract
//! reads the same pixels. Orientation detection reads the folder's last copy (the last
//! page's) for each page of a multi-page scan: its pages are alike.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use quire_shared::analysis::Analyzer;
use quire_shared::analysis::tools::{self, Invocation};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::corpus::CorpusFile;

/// One corpus file as the pipeline analyzed it: its work folder, as the analysis left
/// it, and the tool runs it made.
pub struct Recorded {
    work: tempfile::TempDir,
    pub runs: Vec<Invocation>,
}

/// Analyzes each file of `corpus` with the pipeline's own analyzer (named `source` in a
/// work folder of its own, as the worker does) and records its tool runs.
pub async fn record(analyzer: &Analyzer, corpus: &[CorpusFile]) -> anyhow::Result<Vec<Recorded>> {
    let mut recorded = Vec::with_capacity(corpus.len());
    for file in corpus {
        let work = tempfile::tempdir().context("failed to make a work folder")?;
        let source = work.path().join("source");
        tokio::fs::write(&source, &file.bytes).await?;
        let (analysis, runs) =
            tools::record(analyzer.analyze(&source, file.content_type, work.path())).await;
        analysis.with_context(|| format!("the pipeline failed to analyze {}", file.name))?;
        recorded.push(Recorded { work, runs });
    }
    Ok(recorded)
}

/// A document to run by hand: a copy of a recorded work folder, and the recorded runs
/// with every path into the recorded folder moved into the copy.
pub struct Document {
    work: tempfile::TempDir,
    runs: Vec<Invocation>,
}

impl Document {
    pub fn copy_of(recorded: &Recorded) -> anyhow::Result<Self> {
        let work = tempfile::tempdir().context("failed to make a work folder")?;
        let from = recorded.work.path();
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                std::fs::copy(entry.path(), work.path().join(entry.file_name()))?;
            }
        }
        let to = work.path();
        let runs = recorded
            .runs
            .iter()
            .map(|run| Invocation {
                program: run.program.clone(),
                args: run.args.iter().map(|arg| moved(arg, from, to)).collect(),
                work: to.to_owned(),
                env: run
                    .env
                    .iter()
                    .map(|(name, value)| (name.clone(), moved(value, from, to)))
                    .collect(),
            })
            .collect();
        Ok(Self { work, runs })
    }
}

/// `value` with the folder `from` it names (itself or a path inside it) replaced by `to`;
/// anything else as it is.
fn moved(value: &OsStr, from: &Path, to: &Path) -> OsString {
    match Path::new(value).strip_prefix(from) {
        Ok(rest) if rest.as_os_str().is_empty() => to.as_os_str().to_owned(),
        Ok(rest) => to.join(rest).into_os_string(),
        Err(_) => value.to_owned(),
    }
}

/// What a pass by hand took.
pub struct Ran {
    pub wall_seconds: f64,
    /// Tool runs that exited unsuccessfully (the pipeline tolerates some, such as
    /// orientation detection on a page with too little text); reported, not fatal.
    pub failed_runs: usize,
}

/// Runs `documents` by hand, at most `slots` at once, each one's tools one after the
/// other (as one job runs them); its output read whole, as the pipeline reads it.
pub async fn run(documents: Vec<Document>, slots: usize) -> anyhow::Result<Ran> {
    let gate = Arc::new(Semaphore::new(slots.max(1)));
    let started = Instant::now();
    let mut running = JoinSet::new();
    for document in documents {
        let gate = Arc::clone(&gate);
        running.spawn(async move {
            let _slot = gate.acquire_owned().await?;
            let mut failed = 0;
            for run in &document.runs {
                let output = tokio::process::Command::new(&run.program)
                    .args(&run.args)
                    .env_clear()
                    .envs(run.env.iter().cloned())
                    .current_dir(&run.work)
                    .stdin(Stdio::null())
                    .output()
                    .await
                    .with_context(|| format!("failed to start {}", run.program.display()))?;
                if !output.status.success() {
                    failed += 1;
                }
            }
            // The folder goes once its document is done, outside the slot's time.
            drop(document.work);
            anyhow::Ok(failed)
        });
    }
    let mut failed_runs = 0;
    while let Some(done) = running.join_next().await {
        failed_runs += done.context("a by-hand run panicked")??;
    }
    let wall_seconds = started.elapsed().as_secs_f64();
    if wall_seconds <= 0.0 {
        bail!("a by-hand pass took no time");
    }
    Ok(Ran {
        wall_seconds,
        failed_runs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_into_the_recorded_folder_move_into_the_copy() {
        let (from, to) = (Path::new("/tmp/rec"), Path::new("/tmp/copy"));
        assert_eq!(
            moved("/tmp/rec/page-1.png".as_ref(), from, to),
            "/tmp/copy/page-1.png"
        );
        assert_eq!(moved("/tmp/rec".as_ref(), from, to), "/tmp/copy");
        assert_eq!(moved("/tmp/record/x".as_ref(), from, to), "/tmp/record/x");
        assert_eq!(moved("-r".as_ref(), from, to), "-r");
        assert_eq!(
            moved("/usr/bin/tesseract".as_ref(), from, to),
            "/usr/bin/tesseract"
        );
    }
}
