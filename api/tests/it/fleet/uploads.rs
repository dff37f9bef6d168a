//! Clients uploading over the test network, and what each upload was answered.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::task::JoinSet;
use uuid::Uuid;

/// How one upload was answered.
#[derive(Debug, Clone)]
pub enum Answer {
    /// 201: the document and its analyze job.
    Created { document_id: Uuid, job_id: Uuid },
    /// 503 with a problem+json body whose `status` is 503: its code and detail.
    Unavailable(String),
    /// Anything else: status and body, for the failure message.
    Other(String),
}

pub struct Uploader {
    http: reqwest::Client,
    url: String,
    token: String,
    /// Makes every document's bytes unique (duplicates are refused with 409).
    run: Uuid,
    /// Uploads answered 503 so far, for a test that waits for the first.
    unavailable: AtomicUsize,
}

impl Uploader {
    pub fn new(api_url: &str, token: &str) -> Arc<Self> {
        Arc::new(Self {
            http: reqwest::Client::builder()
                // Longer than any storage timeout: the API answers, the client never
                // gives up first.
                .timeout(Duration::from_secs(120))
                .build()
                .expect("http client"),
            url: format!("{api_url}/api/documents"),
            token: token.to_owned(),
            run: Uuid::new_v4(),
            unavailable: AtomicUsize::new(0),
        })
    }

    /// How many uploads were answered 503 so far.
    pub fn unavailable(&self) -> usize {
        self.unavailable.load(Ordering::Relaxed)
    }

    pub async fn upload(&self, number: usize) -> Answer {
        let text = format!(
            "Fleet letter {number} of run {}\nDated 2024-03-15, total {number}.00 EUR\n",
            self.run
        );
        let form = reqwest::multipart::Form::new().part(
            "file",
            reqwest::multipart::Part::bytes(text.into_bytes())
                .file_name(format!("letter-{number}.txt"))
                .mime_str("text/plain")
                .expect("mime"),
        );
        let response = match self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .multipart(form)
            .send()
            .await
        {
            Ok(response) => response,
            Err(error) => return Answer::Other(format!("no answer: {error}")),
        };
        let status = response.status().as_u16();
        let problem = response
            .headers()
            .get("content-type")
            .is_some_and(|value| value.as_bytes().starts_with(b"application/problem+json"));
        let body: Value = response.json().await.unwrap_or(Value::Null);
        match status {
            201 => Answer::Created {
                document_id: crate::helpers::uuid_at(&body, "/document/id"),
                job_id: crate::helpers::uuid_at(&body, "/job/id"),
            },
            503 if problem && body["status"] == 503 => {
                self.unavailable.fetch_add(1, Ordering::Relaxed);
                Answer::Unavailable(format!("{}: {}", body["code"], body["detail"]))
            }
            _ => Answer::Other(format!("{status} (problem+json: {problem}) {body}")),
        }
    }

    /// `clients` concurrent clients upload documents numbered from `first` until `count`
    /// are sent or `stop` is set; every answer, in no particular order.
    pub fn spawn(
        self: &Arc<Self>,
        clients: usize,
        first: usize,
        count: usize,
        stop: Arc<AtomicBool>,
    ) -> JoinSet<Vec<Answer>> {
        let next = Arc::new(AtomicUsize::new(0));
        let mut set = JoinSet::new();
        for _ in 0..clients {
            let (uploader, next, stop) = (Arc::clone(self), Arc::clone(&next), Arc::clone(&stop));
            set.spawn(async move {
                let mut answers = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= count {
                        break;
                    }
                    answers.push(uploader.upload(first + index).await);
                }
                answers
            });
        }
        set
    }
}

/// Every answer of the clients in `set`.
pub async fn answers(mut set: JoinSet<Vec<Answer>>) -> Vec<Answer> {
    let mut all = Vec::new();
    while let Some(answers) = set.join_next().await {
        all.extend(answers.expect("an upload client panicked"));
    }
    all
}

/// What every answer but a 201 said.
pub fn not_created(answers: &[Answer]) -> Vec<String> {
    answers
        .iter()
        .filter_map(|answer| match answer {
            Answer::Created { .. } => None,
            Answer::Unavailable(problem) => Some(format!("503 problem+json {problem}")),
            Answer::Other(text) => Some(text.clone()),
        })
        .collect()
}

/// What every answer but a 201 or a 503 problem+json said.
pub fn unexpected(answers: &[Answer]) -> Vec<&str> {
    answers
        .iter()
        .filter_map(|answer| match answer {
            Answer::Other(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The (document, job) of every created document.
pub fn created(answers: &[Answer]) -> Vec<(Uuid, Uuid)> {
    answers
        .iter()
        .filter_map(|answer| match answer {
            Answer::Created {
                document_id,
                job_id,
            } => Some((*document_id, *job_id)),
            _ => None,
        })
        .collect()
}
