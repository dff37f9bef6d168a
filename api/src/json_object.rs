//! A JSON body that must be a JSON object. serde's derive also reads a struct from an
//! array of its fields in order (`[null, null]` is a `DocumentPatch`), which no route's
//! document allows: the body is read as an object first (through `web::Json`, so the
//! size limit and the 400 `invalid_json` of `lib.rs` apply), then as the route's type.

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use futures_util::future::LocalBoxFuture;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

pub struct JsonObject<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for JsonObject<T> {
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<'static, Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let object =
            web::Json::<serde_json::Map<String, serde_json::Value>>::from_request(req, payload);
        Box::pin(async move {
            let web::Json(object) = object.await?;
            serde_json::from_value(serde_json::Value::Object(object))
                .map(JsonObject)
                .map_err(|_| {
                    ApiError::bad_request(
                        "invalid_json",
                        "the body is not the JSON this route takes",
                    )
                    .into()
                })
        })
    }
}
