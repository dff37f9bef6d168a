//! The SSE `id` of a position in a tenant's event log: `e1.<txid>.<id>`, hex-encoded,
//! opaque to clients (the same style as the listing's cursors).

use quire_shared::db::tenant_events::EventCursor;

/// Longer than any id this module makes: anything longer is refused unread.
const MAX_ENCODED_CHARS: usize = 96;

pub fn encode(cursor: EventCursor) -> String {
    hex::encode(format!("e1.{}.{}", cursor.txid, cursor.id))
}

/// The position an id names; `None` for anything this module did not make. Only the
/// spelling `encode` writes is taken (no upper-case hex, sign or leading zero), so the
/// ids are exactly the strings the OpenAPI document's pattern describes.
pub fn decode(text: &str) -> Option<EventCursor> {
    if text.len() > MAX_ENCODED_CHARS {
        return None;
    }
    let decoded = String::from_utf8(hex::decode(text).ok()?).ok()?;
    let mut parts = decoded.strip_prefix("e1.")?.splitn(2, '.');
    let txid: i64 = parts.next()?.parse().ok()?;
    let id: i64 = parts.next()?.parse().ok()?;
    let cursor = EventCursor { txid, id };
    (txid >= 0 && id >= 0 && encode(cursor) == text).then_some(cursor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_anything_else_is_refused() {
        for cursor in [
            EventCursor::START,
            EventCursor {
                txid: 7_341,
                id: 12,
            },
            EventCursor {
                txid: i64::MAX,
                id: i64::MAX,
            },
        ] {
            assert_eq!(decode(&encode(cursor)), Some(cursor));
        }
        let forged = |text: &str| hex::encode(text);
        for bad in [
            String::new(),
            "zz".to_owned(),
            "not hex at all".to_owned(),
            forged("e2.1.2"),
            forged("e1.1"),
            forged("e1.-1.2"),
            forged("e1.1.2.3"),
            forged("e1.99999999999999999999.1"),
            forged("e1.01.2"),
            forged("e1.+1.2"),
            hex::encode("e1.1.2").to_uppercase(),
            format!(" {}", hex::encode("e1.1.2")),
            "ab".repeat(60),
        ] {
            assert_eq!(decode(&bad), None, "{bad}");
        }
    }
}
