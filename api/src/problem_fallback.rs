//! Every error answer of the API is problem+json, including those actix makes itself (a
//! method a route does not take, a malformed request line or header): this middleware
//! turns any other 4xx/5xx body into the same shape, with a stable code and the request
//! id. A page the dashboard rendered itself (HTML: "that is not a valid operator token")
//! is left as it is: a person reads it in a browser.

use actix_web::ResponseError;
use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::ServiceResponse;
use actix_web::http::StatusCode;
use actix_web::http::header::CONTENT_TYPE;
use actix_web::middleware::{ErrorHandlerResponse, ErrorHandlers};

use crate::error::ApiError;

pub fn middleware<B: MessageBody + 'static>() -> ErrorHandlers<B> {
    ErrorHandlers::new().default_handler(to_problem)
}

fn to_problem<B: MessageBody + 'static>(
    response: ServiceResponse<B>,
) -> actix_web::Result<ErrorHandlerResponse<B>> {
    let already = response.headers().get(CONTENT_TYPE).is_some_and(|value| {
        let value = value.as_bytes();
        value.starts_with(b"application/problem+json") || value.starts_with(b"text/html")
    });
    if already {
        return Ok(ErrorHandlerResponse::Response(
            response.map_into_left_body(),
        ));
    }
    let error = match response.status() {
        StatusCode::NOT_FOUND => ApiError::NotFound,
        // The framework's own 405 (the dashboard's routes): its Allow header, if any, stays.
        StatusCode::METHOD_NOT_ALLOWED => ApiError::MethodNotAllowed {
            allow: response
                .headers()
                .get(actix_web::http::header::ALLOW)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned),
        },
        StatusCode::UNAUTHORIZED => ApiError::Unauthorized,
        status if status.is_server_error() => {
            ApiError::Internal(anyhow::anyhow!("the framework answered {status}"))
        }
        status => ApiError::Rejected { status },
    };
    let (request, _) = response.into_parts();
    let problem = ServiceResponse::new(request, error.error_response()).map_into_boxed_body();
    Ok(ErrorHandlerResponse::Response(
        problem.map_body(|_, body| EitherBody::right(body)),
    ))
}
