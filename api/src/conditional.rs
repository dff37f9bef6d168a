//! Conditional requests (RFC 9110 §13): the `ETag` of the document and job views,
//! `If-None-Match` answering 304, and `If-Match` read into the versions a guarded write
//! accepts (the write compares them in its own UPDATE and answers 412 otherwise).
//!
//! A document's ETag is its row version (`documents.row_version`, bumped by every
//! statement that changes what its view shows), so a write can compare it in SQL. A
//! job's is a digest of its view: jobs are only read conditionally, never written, and
//! the view also shows what holds the job (pauses), which lives in other rows.

use actix_web::http::header::{self, HeaderName};
use actix_web::{HttpRequest, HttpResponse};
use quire_shared::db::documents::IfMatch;
use sha2::{Digest, Sha256};

/// What the OpenAPI document says about each request header, once.
pub const IF_MATCH_DESCRIPTION: &str = "ETags of the document (from GET, PATCH, DELETE or \
    restore): the write applies only to one of these versions, else 412 \
    precondition_failed and nothing changes. `*` or no header: any version (as without it).";
pub const IF_NONE_MATCH_DESCRIPTION: &str =
    "ETags the client holds: 304 without a body while the representation is one of them";

/// A document's ETag: its row version, as a strong entity tag.
pub fn document_etag(row_version: i64) -> String {
    format!("\"{row_version}\"")
}

/// A job view's ETag: a digest of the exact bytes sent.
pub fn body_etag(body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    format!("\"{}\"", hex::encode(&digest[..16]))
}

/// The versions `If-Match` accepts. Our tags are strong and numeric; a weak tag or a tag
/// that is none of ours matches nothing (strong comparison), so a header that names
/// none of the current versions answers 412 rather than writing blind.
pub fn if_match(request: &HttpRequest) -> IfMatch {
    let values: Vec<_> = request.headers().get_all(header::IF_MATCH).collect();
    if values.is_empty() {
        return IfMatch::Any;
    }
    let mut versions = Vec::new();
    for tag in values
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
    {
        if tag == "*" {
            return IfMatch::Any;
        }
        if let Some(version) = tag
            .strip_prefix('"')
            .and_then(|tag| tag.strip_suffix('"'))
            .and_then(|tag| tag.parse::<i64>().ok())
        {
            versions.push(version);
        }
    }
    IfMatch::OneOf(versions)
}

/// Whether `If-None-Match` names `etag` (weak comparison, `*` for any): answer 304.
pub fn none_match(request: &HttpRequest, etag: &str) -> bool {
    let opaque = |tag: &str| tag.trim().trim_start_matches("W/").to_owned();
    let current = opaque(etag);
    request
        .headers()
        .get_all(header::IF_NONE_MATCH)
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|tag| tag.trim() == "*" || opaque(tag) == current)
}

/// 304: the client's copy is current.
pub fn not_modified(etag: &str) -> HttpResponse {
    HttpResponse::NotModified()
        .insert_header((header::ETAG, etag.to_owned()))
        .finish()
}

/// The `ETag` response header.
pub fn etag_header(etag: String) -> (HeaderName, String) {
    (header::ETAG, etag)
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    #[test]
    fn if_match_reads_our_strong_tags_and_matches_nothing_else() {
        let request = TestRequest::default().to_http_request();
        assert_eq!(if_match(&request), IfMatch::Any);
        let request = TestRequest::default()
            .insert_header((header::IF_MATCH, "\"3\", \"5\""))
            .to_http_request();
        assert_eq!(if_match(&request), IfMatch::OneOf(vec![3, 5]));
        let request = TestRequest::default()
            .insert_header((header::IF_MATCH, "*"))
            .to_http_request();
        assert_eq!(if_match(&request), IfMatch::Any);
        for foreign in ["W/\"3\"", "3", "\"abc\"", ""] {
            let request = TestRequest::default()
                .insert_header((header::IF_MATCH, foreign))
                .to_http_request();
            assert_eq!(if_match(&request), IfMatch::OneOf(vec![]), "{foreign}");
        }
    }

    #[test]
    fn if_none_match_compares_weakly_and_takes_a_star() {
        let etag = document_etag(7);
        for (header_value, matches) in [
            ("\"7\"", true),
            ("W/\"7\"", true),
            ("\"6\", \"7\"", true),
            ("*", true),
            ("\"6\"", false),
        ] {
            let request = TestRequest::default()
                .insert_header((header::IF_NONE_MATCH, header_value))
                .to_http_request();
            assert_eq!(none_match(&request, &etag), matches, "{header_value}");
        }
        let request = TestRequest::default().to_http_request();
        assert!(!none_match(&request, &etag));
    }
}
