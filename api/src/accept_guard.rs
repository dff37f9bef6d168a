//! JSON routes answer JSON only: a request whose `Accept` rules JSON out gets 406
//! problem+json instead of a body it said it cannot read.

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::ACCEPT;
use actix_web::middleware::Next;

use crate::error::ApiError;

fn accepts_json(accept: &str) -> bool {
    accept.split(',').any(|range| {
        let media = range
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        matches!(
            media.as_str(),
            "*/*" | "application/*" | "application/json" | "application/problem+json"
        )
    })
}

/// The event stream also answers those who ask for it by its own type.
fn accepts_event_stream(accept: &str) -> bool {
    accept.split(',').any(|range| {
        let media = range
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        matches!(media.as_str(), "text/event-stream" | "text/*")
    })
}

pub async fn middleware(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    // Downloads answer the file's own type; the API browser and the dashboard are HTML.
    let download = req.path().starts_with("/ops")
        || req.path().ends_with("/content")
        || req.path().ends_with("/thumbnail")
        || req.path().ends_with("/archive")
        || req.path().starts_with("/api/docs");
    let events = req.path() == "/api/events";
    let refused = !download
        && req
            .headers()
            .get(ACCEPT)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|accept| {
                let acceptable = accepts_json(accept) || (events && accepts_event_stream(accept));
                !acceptable
            });
    if refused {
        let (request, _) = req.into_parts();
        let response = actix_web::ResponseError::error_response(&ApiError::NotAcceptable);
        return Ok(ServiceResponse::new(request, response).map_into_right_body());
    }
    Ok(next.call(req).await?.map_into_left_body())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_or_wildcards_are_acceptable() {
        assert!(accepts_json("application/json"));
        assert!(accepts_json("text/html, */*;q=0.1"));
        assert!(accepts_json("application/*"));
        assert!(!accepts_json("text/html"));
        assert!(!accepts_json("image/png, text/plain"));
        assert!(accepts_event_stream("text/event-stream"));
        assert!(!accepts_event_stream("text/html"));
    }
}
