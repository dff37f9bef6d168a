//! Signed tenant deletion (DESIGN §7). An operator's request to delete or reset a tenant
//! is the message `v2|tenant_id|tenant_name|action|remove_tenant|final_status|nonce|
//! issued_at`, signed with HMAC-SHA256 under a key derived from the server secret for this
//! one purpose. The API checks it before marking the tenant `deleting`; the worker checks
//! it again before it wipes anything. Nonces are single-use (the `used_nonces` table, not
//! this module).
//!
//! Every field of the request except the signature is in the message: each one changes
//! what the worker does. The v1 message left `remove_tenant` out, so a signed "keep
//! suspended" request could be turned into one that removes the tenant; a v1 request
//! (one without `version`) is refused whatever its signature.
//!
//! The message is unambiguous although a tenant name may contain `|`: every field after
//! the name has a fixed alphabet without `|`, so the name is whatever lies between the
//! tenant id and the fifth-last separator.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use uuid::Uuid;

use crate::states::TenantStatus;

/// Separates the deletion key from every other use of the server secret.
const KEY_PURPOSE: &[u8] = b"quire/v1/tenant-deletion-signing-key";
/// A request older than this is refused.
pub const MAX_AGE_SECONDS: i64 = 300;
/// A request from further in the future than this is refused.
pub const MAX_SKEW_SECONDS: i64 = 30;
/// The one message version accepted.
pub const VERSION: u8 = 2;

/// What a request without `version` is: one a v1 signer made, before the field existed.
fn unversioned() -> u8 {
    1
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeletionAction {
    /// Wipe the tenant's data, members and capability sets; remove the tenant row or leave
    /// it in `final_status` with an empty index.
    Delete,
    /// Wipe the tenant's data but keep its members; leave it in `final_status`.
    Reset,
}

impl DeletionAction {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delete => "delete",
            Self::Reset => "reset",
        }
    }
}

/// The signed request, as sent to the API and carried as the `delete-tenant` payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantDeletionRequest {
    /// [`VERSION`]; absent in a v1 request, which is refused.
    #[serde(default = "unversioned")]
    pub version: u8,
    pub remove_tenant: bool,
    pub tenant_name: String,
    pub action: DeletionAction,
    pub nonce: String,
    pub issued_at: String,
    pub signature: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_status: Option<TenantStatus>,
}

/// Why a request was refused; each code is stable and safe to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    #[error("the request is not a v2 request: sign it again with this release's quire-admin")]
    VersionUnsupported,
    #[error("the signature is not 64 lowercase hex digits")]
    SignatureMalformed,
    #[error("the signature does not match the request")]
    SignatureInvalid,
    #[error("the nonce is not 32 lowercase hex digits")]
    NonceMalformed,
    #[error("issued_at is not an RFC 3339 date-time")]
    IssuedAtMalformed,
    #[error("the request is more than five minutes old")]
    Stale,
    #[error("the request is issued in the future")]
    FromTheFuture,
    #[error(
        "the flags contradict each other: only a delete without final_status may remove the tenant, and final_status is active or suspended"
    )]
    FlagsInconsistent,
}

impl ProofError {
    pub fn code(self) -> &'static str {
        match self {
            Self::VersionUnsupported => "version_unsupported",
            Self::SignatureMalformed => "signature_malformed",
            Self::SignatureInvalid => "signature_invalid",
            Self::NonceMalformed => "nonce_malformed",
            Self::IssuedAtMalformed => "issued_at_malformed",
            Self::Stale => "request_stale",
            Self::FromTheFuture => "request_from_the_future",
            Self::FlagsInconsistent => "flags_inconsistent",
        }
    }
}

type HmacSha256 = Hmac<Sha256>;

fn derived_key(server_secret: &[u8]) -> Result<[u8; 32], ProofError> {
    let mut mac =
        HmacSha256::new_from_slice(server_secret).map_err(|_| ProofError::SignatureInvalid)?;
    mac.update(KEY_PURPOSE);
    Ok(mac.finalize().into_bytes().into())
}

/// The MAC of `message` under the deletion key, ready to finalize or verify.
pub(crate) fn keyed_mac(server_secret: &[u8], message: &str) -> Result<HmacSha256, ProofError> {
    let mut mac = HmacSha256::new_from_slice(&derived_key(server_secret)?)
        .map_err(|_| ProofError::SignatureInvalid)?;
    mac.update(message.as_bytes());
    Ok(mac)
}

fn is_lower_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A fresh nonce: 128 random bits as lowercase hex.
pub fn new_nonce() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// `issued_at` as the request carries it: RFC 3339, UTC, whole seconds.
pub fn format_issued_at(at: OffsetDateTime) -> String {
    let at = at.replace_nanosecond(0).unwrap_or(at);
    at.to_offset(time::UtcOffset::UTC)
        .format(&Rfc3339)
        .unwrap_or_default()
}

impl TenantDeletionRequest {
    /// The exact bytes that are signed: every field but the signature, so changing any
    /// of them (or the tenant) breaks it. `version` is always [`VERSION`] here, not the
    /// request's own: a request of another version never gets as far as a comparison.
    pub fn message(&self, tenant_id: Uuid) -> String {
        format!(
            "v{VERSION}|{tenant_id}|{}|{}|{}|{}|{}|{}",
            self.tenant_name,
            self.action.as_str(),
            self.remove_tenant,
            self.final_status.map_or("", TenantStatus::as_str),
            self.nonce,
            self.issued_at,
        )
    }

    /// Builds and signs a request (the CLI's side).
    #[allow(clippy::too_many_arguments)]
    pub fn signed(
        server_secret: &[u8],
        tenant_id: Uuid,
        tenant_name: &str,
        action: DeletionAction,
        remove_tenant: bool,
        final_status: Option<TenantStatus>,
        nonce: String,
        issued_at: OffsetDateTime,
    ) -> Result<Self, ProofError> {
        let mut request = Self {
            version: VERSION,
            remove_tenant,
            tenant_name: tenant_name.to_owned(),
            action,
            nonce,
            issued_at: format_issued_at(issued_at),
            signature: String::new(),
            final_status,
        };
        request.check_flags()?;
        let mac = keyed_mac(server_secret, &request.message(tenant_id))?;
        request.signature = hex::encode(mac.finalize().into_bytes());
        Ok(request)
    }

    /// The tenant state the job leaves behind, or `None` when it removes the tenant.
    pub fn final_status(&self) -> Option<TenantStatus> {
        (!self.remove_tenant).then(|| self.final_status.unwrap_or(TenantStatus::Suspended))
    }

    fn check_flags(&self) -> Result<(), ProofError> {
        let removes_with_a_status = self.remove_tenant && self.final_status.is_some();
        let resets_away = self.remove_tenant && self.action == DeletionAction::Reset;
        let odd_status = !matches!(
            self.final_status,
            None | Some(TenantStatus::Active | TenantStatus::Suspended)
        );
        if removes_with_a_status || resets_away || odd_status {
            return Err(ProofError::FlagsInconsistent);
        }
        Ok(())
    }

    /// Checks version, form, flags, signature (in constant time) and age, as of `now`.
    /// Tenant row and nonce are the caller's to check.
    pub fn verify(
        &self,
        server_secret: &[u8],
        tenant_id: Uuid,
        now: OffsetDateTime,
    ) -> Result<(), ProofError> {
        // First, and whatever the signature: a v1 signature may be genuine and still
        // authorize something its signer never saw (`remove_tenant`).
        if self.version != VERSION {
            return Err(ProofError::VersionUnsupported);
        }
        if !is_lower_hex(&self.signature, 64) {
            return Err(ProofError::SignatureMalformed);
        }
        if !is_lower_hex(&self.nonce, 32) {
            return Err(ProofError::NonceMalformed);
        }
        self.check_flags()?;
        let signature = hex::decode(&self.signature).map_err(|_| ProofError::SignatureMalformed)?;
        let mac = keyed_mac(server_secret, &self.message(tenant_id))?;
        // `verify_slice` compares in constant time.
        mac.verify_slice(&signature)
            .map_err(|_| ProofError::SignatureInvalid)?;
        let issued_at = OffsetDateTime::parse(&self.issued_at, &Rfc3339)
            .map_err(|_| ProofError::IssuedAtMalformed)?;
        let age = (now - issued_at).whole_seconds();
        if age > MAX_AGE_SECONDS {
            return Err(ProofError::Stale);
        }
        if -age > MAX_SKEW_SECONDS {
            return Err(ProofError::FromTheFuture);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"a-server-secret-long-enough-for-tests";

    fn request(at: OffsetDateTime) -> (Uuid, TenantDeletionRequest) {
        let tenant = Uuid::now_v7();
        let request = TenantDeletionRequest::signed(
            SECRET,
            tenant,
            "acme|corp",
            DeletionAction::Delete,
            true,
            None,
            new_nonce(),
            at,
        )
        .expect("sign");
        (tenant, request)
    }

    #[test]
    fn a_signed_request_verifies_and_any_change_breaks_it() {
        let now = OffsetDateTime::now_utc();
        let (tenant, good) = request(now);
        assert_eq!(good.verify(SECRET, tenant, now), Ok(()));
        assert_eq!(
            good.verify(SECRET, Uuid::now_v7(), now),
            Err(ProofError::SignatureInvalid)
        );
        assert_eq!(
            good.verify(b"another-secret-entirely-xxxxxxxxxxxxx", tenant, now),
            Err(ProofError::SignatureInvalid)
        );
        let mut renamed = good.clone();
        renamed.tenant_name = "acme".into();
        assert_eq!(
            renamed.verify(SECRET, tenant, now),
            Err(ProofError::SignatureInvalid)
        );
        let mut flipped = good.clone();
        let last = flipped.signature.pop().expect("digit");
        flipped.signature.push(if last == '0' { '1' } else { '0' });
        assert_eq!(
            flipped.verify(SECRET, tenant, now),
            Err(ProofError::SignatureInvalid)
        );
    }

    #[test]
    fn malformed_signatures_are_refused_before_any_comparison() {
        let now = OffsetDateTime::now_utc();
        let (tenant, good) = request(now);
        for bad in [
            String::new(),
            good.signature[..63].to_owned(),
            good.signature.to_uppercase(),
            "zz".repeat(32),
            format!("{}00", good.signature),
        ] {
            let mut request = good.clone();
            request.signature = bad.clone();
            assert_eq!(
                request.verify(SECRET, tenant, now),
                Err(ProofError::SignatureMalformed),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn stale_and_future_requests_are_refused() {
        let now = OffsetDateTime::now_utc();
        let (tenant, old) = request(now - time::Duration::seconds(MAX_AGE_SECONDS + 1));
        assert_eq!(old.verify(SECRET, tenant, now), Err(ProofError::Stale));
        let (tenant, edge) = request(now - time::Duration::seconds(MAX_AGE_SECONDS - 2));
        assert_eq!(edge.verify(SECRET, tenant, now), Ok(()));
        let (tenant, future) = request(now + time::Duration::seconds(MAX_SKEW_SECONDS + 2));
        assert_eq!(
            future.verify(SECRET, tenant, now),
            Err(ProofError::FromTheFuture)
        );
    }

    #[test]
    fn contradictory_flags_cannot_be_signed_or_verified() {
        let now = OffsetDateTime::now_utc();
        let reset_away = TenantDeletionRequest::signed(
            SECRET,
            Uuid::now_v7(),
            "t",
            DeletionAction::Reset,
            true,
            None,
            new_nonce(),
            now,
        );
        assert_eq!(reset_away, Err(ProofError::FlagsInconsistent));
        let (tenant, mut request) = request(now);
        request.final_status = Some(TenantStatus::Deleting);
        assert_eq!(
            request.verify(SECRET, tenant, now),
            Err(ProofError::FlagsInconsistent)
        );
    }

    #[test]
    fn the_message_has_the_documented_shape() {
        let at = time::macros::datetime!(2026-11-30 12:00:00 UTC);
        let tenant = Uuid::nil();
        let request = TenantDeletionRequest::signed(
            SECRET,
            tenant,
            "acme",
            DeletionAction::Reset,
            false,
            Some(TenantStatus::Active),
            "0".repeat(32),
            at,
        )
        .expect("sign");
        assert_eq!(
            request.message(tenant),
            format!(
                "v2|{tenant}|acme|reset|false|active|{}|2026-11-30T12:00:00Z",
                "0".repeat(32)
            )
        );
        assert_eq!(request.final_status(), Some(TenantStatus::Active));
        let json = serde_json::to_value(&request).expect("json");
        assert_eq!(json["version"], 2);
    }

    #[test]
    fn every_field_is_signed() {
        let now = OffsetDateTime::now_utc();
        // A delete that keeps the tenant: each change below keeps the flags consistent,
        // so only the signature can refuse it.
        let tenant = Uuid::now_v7();
        let good = TenantDeletionRequest::signed(
            SECRET,
            tenant,
            "acme",
            DeletionAction::Delete,
            false,
            None,
            new_nonce(),
            now,
        )
        .expect("sign");
        assert_eq!(good.verify(SECRET, tenant, now), Ok(()));
        let earlier = format_issued_at(now - time::Duration::seconds(1));
        type Change<'a> = Box<dyn Fn(&mut TenantDeletionRequest) + 'a>;
        let changes: Vec<(&str, Change)> = vec![
            ("remove_tenant", Box::new(|r| r.remove_tenant = true)),
            ("tenant_name", Box::new(|r| r.tenant_name.push('x'))),
            ("action", Box::new(|r| r.action = DeletionAction::Reset)),
            (
                "final_status",
                Box::new(|r| r.final_status = Some(TenantStatus::Suspended)),
            ),
            ("nonce", Box::new(|r| r.nonce = "1".repeat(32))),
            ("issued_at", Box::new(|r| r.issued_at.clone_from(&earlier))),
        ];
        for (field, change) in changes {
            let mut request = good.clone();
            change(&mut request);
            assert_ne!(request, good, "{field} changed nothing");
            assert_eq!(
                request.verify(SECRET, tenant, now),
                Err(ProofError::SignatureInvalid),
                "{field}"
            );
        }
    }

    #[test]
    fn a_v1_request_is_refused_whatever_its_signature() {
        let now = OffsetDateTime::now_utc();
        let (tenant, good) = request(now);
        let mut json = serde_json::to_value(&good).expect("json");
        json.as_object_mut().expect("object").remove("version");
        let v1: TenantDeletionRequest = serde_json::from_value(json).expect("a v1 body parses");
        assert_eq!(v1.version, 1);
        assert_eq!(
            v1.verify(SECRET, tenant, now),
            Err(ProofError::VersionUnsupported)
        );
        let mut v3 = good.clone();
        v3.version = 3;
        assert_eq!(
            v3.verify(SECRET, tenant, now),
            Err(ProofError::VersionUnsupported)
        );
    }
}
