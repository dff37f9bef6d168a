//! Requests as a v1 signer made them, so tests can prove the server refuses them.

use uuid::Uuid;

use crate::signing::{TenantDeletionRequest, keyed_mac};
use crate::states::TenantStatus;

/// `request` signed as v1 signed it: `version` 1 and a genuine signature over
/// `v1|tenant_id|tenant_name|action|nonce|issued_at|final_status`, which leaves
/// `remove_tenant` out (change it afterwards and the v1 signature still holds).
pub fn signed_as_v1(
    server_secret: &[u8],
    tenant_id: Uuid,
    mut request: TenantDeletionRequest,
) -> TenantDeletionRequest {
    let message = format!(
        "v1|{tenant_id}|{}|{}|{}|{}|{}",
        request.tenant_name,
        request.action.as_str(),
        request.nonce,
        request.issued_at,
        request.final_status.map_or("", TenantStatus::as_str),
    );
    let mac = keyed_mac(server_secret, &message).expect("deletion key");
    request.version = 1;
    request.signature = hex::encode(hmac::Mac::finalize(mac).into_bytes());
    request
}
