//! A real HTTP receiver for the webhook tests: an actix-web server on 127.0.0.1, port 0,
//! that records every request it gets and answers as its plan says — a status, an
//! answer after a delay, or no answer at all (it hangs) — then 200 once the plan is
//! spent (or the fallback status, for a receiver that always fails).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use quire_shared::test_support::{DEADLINE, eventually};

/// How the receiver answers one request.
#[derive(Debug, Clone, Copy)]
pub enum Answer {
    Status(u16),
    /// 200 after this long.
    After(Duration),
    /// Never answers (the sender's timeout must end the attempt).
    Hang,
}

/// One request as the receiver got it.
#[derive(Debug, Clone)]
pub struct Received {
    pub webhook_id: String,
    pub webhook_timestamp: String,
    pub webhook_signature: String,
    pub content_type: String,
    pub body: Vec<u8>,
}

#[derive(Default)]
struct Shared {
    plan: VecDeque<Answer>,
    fallback: u16,
    received: Vec<Received>,
}

pub struct Receiver {
    pub port: u16,
    shared: Arc<Mutex<Shared>>,
    handle: actix_web::dev::ServerHandle,
}

fn header(request: &HttpRequest, name: &str) -> String {
    request
        .headers()
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

async fn receive(
    request: HttpRequest,
    body: web::Bytes,
    shared: web::Data<Mutex<Shared>>,
) -> HttpResponse {
    let answer = {
        let mut shared = shared.lock().expect("receiver state");
        shared.received.push(Received {
            webhook_id: header(&request, "webhook-id"),
            webhook_timestamp: header(&request, "webhook-timestamp"),
            webhook_signature: header(&request, "webhook-signature"),
            content_type: header(&request, "content-type"),
            body: body.to_vec(),
        });
        let fallback = shared.fallback;
        shared.plan.pop_front().unwrap_or(Answer::Status(fallback))
    };
    match answer {
        Answer::Status(status) => {
            let status = actix_web::http::StatusCode::from_u16(status).expect("status");
            HttpResponse::build(status).body(format!("answered {}", status.as_u16()))
        }
        Answer::After(delay) => {
            tokio::time::sleep(delay).await;
            HttpResponse::Ok().body("ok, slowly")
        }
        Answer::Hang => {
            std::future::pending::<()>().await;
            HttpResponse::Ok().finish()
        }
    }
}

impl Receiver {
    /// A receiver that answers `plan` in order, then `fallback` (200 for a healthy one).
    pub fn start(plan: Vec<Answer>, fallback: u16) -> Self {
        let shared = Arc::new(Mutex::new(Shared {
            plan: plan.into(),
            fallback,
            received: Vec::new(),
        }));
        let data = web::Data::from(Arc::clone(&shared));
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .default_service(web::to(receive))
        })
        .workers(1)
        .disable_signals()
        .shutdown_timeout(0)
        .bind(("127.0.0.1", 0))
        .expect("bind the receiver");
        let port = server.addrs()[0].port();
        let running = server.run();
        let handle = running.handle();
        tokio::spawn(running);
        Self {
            port,
            shared,
            handle,
        }
    }

    /// A receiver that answers 200 to everything.
    pub fn healthy() -> Self {
        Self::start(Vec::new(), 200)
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hooks/quire", self.port)
    }

    pub fn received(&self) -> Vec<Received> {
        self.shared.lock().expect("receiver state").received.clone()
    }

    /// Waits until at least `count` requests arrived; returns them all.
    pub async fn wait_for(&self, count: usize) -> Vec<Received> {
        eventually(
            DEADLINE,
            &format!("the receiver got {count} requests"),
            || async move {
                let received = self.received();
                (received.len() >= count).then_some(received)
            },
        )
        .await
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        // Not graceful: a hanging request must not keep the server alive.
        let handle = self.handle.clone();
        tokio::spawn(async move { handle.stop(false).await });
    }
}
