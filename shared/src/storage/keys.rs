//! Storage keys, generated from ids only.

use uuid::Uuid;

use crate::db::assets::AssetKind;
use crate::db::jobs::Fence;

/// A key in the object store. Only this module builds keys, from ids, so a key can never
/// contain `..`, a client's filename or anything else a client chose.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StorageKey(String);

impl StorageKey {
    /// `tenants/{tenant}/sources/{bucket}/{version}`: the uploaded bytes of one version,
    /// in one of 256 buckets (the version id's last two hex digits, which are random).
    /// A flat layout on purpose: a folder per document and version cost each upload
    /// three `mkdir`s, and ext4's directory placement was the largest cost of an upload
    /// (docs/benchmarks.md). Versions stored before keep their keys (rows store them).
    pub fn document_source(tenant_id: Uuid, version_id: Uuid) -> Self {
        let version = version_id.simple().to_string();
        let bucket = &version[version.len() - 2..];
        Self(format!("tenants/{tenant_id}/sources/{bucket}/{version}"))
    }

    /// `tenants/{tenant}/documents/{doc}/versions/{ver}/{kind}-{job}-{attempt}-{task}`:
    /// one asset (thumbnail, text) of a version as ONE run wrote it. Every run writes keys
    /// of its own (the task tells apart even a claim made again at the same attempt), so
    /// a run that lost its job can never overwrite the object a row names; the asset row,
    /// updated in the run's fenced commit, says which key is current. Rows written before
    /// name `…/{ver}/{kind}`, and keep it until the next analysis replaces it.
    pub fn attempt_asset(
        tenant_id: Uuid,
        document_id: Uuid,
        version_id: Uuid,
        kind: AssetKind,
        fence: &Fence,
    ) -> Self {
        Self(format!(
            "tenants/{tenant_id}/documents/{document_id}/versions/{version_id}/{}-{}-{}-{}",
            kind.as_str(),
            fence.job_id.simple(),
            fence.attempt,
            fence.task_id.simple()
        ))
    }

    /// `tenants/{tenant}`: everything a tenant ever stored lives under it.
    pub fn tenant_prefix(tenant_id: Uuid) -> Self {
        Self(format!("tenants/{tenant_id}"))
    }

    /// Rebuilds a key read back from the database, refusing anything that is not made of
    /// plain path segments.
    pub fn from_stored(key: &str) -> Option<Self> {
        let plain = !key.is_empty()
            && key.split('/').all(|segment| {
                !segment.is_empty()
                    && segment != "."
                    && segment != ".."
                    && segment
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
            });
        plain.then(|| Self(key.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_keys_are_made_of_ids() {
        let (t, v) = (Uuid::now_v7(), Uuid::now_v7());
        let key = StorageKey::document_source(t, v);
        let simple = v.simple().to_string();
        assert_eq!(
            key.as_str(),
            format!("tenants/{t}/sources/{}/{simple}", &simple[30..])
        );
        assert_eq!(StorageKey::from_stored(key.as_str()), Some(key.clone()));
        assert!(
            key.as_str()
                .starts_with(&format!("{}/", StorageKey::tenant_prefix(t).as_str()))
        );
    }

    #[test]
    fn asset_keys_differ_for_every_run_and_read_back() {
        let (t, d, v) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let fence = Fence {
            job_id: Uuid::now_v7(),
            worker_id: "worker-1".to_owned(),
            attempt: 2,
            task_id: Uuid::now_v7(),
        };
        let key = StorageKey::attempt_asset(t, d, v, AssetKind::Thumbnail, &fence);
        assert_eq!(StorageKey::from_stored(key.as_str()), Some(key.clone()));
        let again = Fence {
            task_id: Uuid::now_v7(),
            ..fence.clone()
        };
        let next = Fence {
            attempt: 3,
            ..fence.clone()
        };
        for other in [&again, &next] {
            assert_ne!(
                StorageKey::attempt_asset(t, d, v, AssetKind::Thumbnail, other),
                key
            );
        }
        assert_ne!(
            StorageKey::attempt_asset(t, d, v, AssetKind::Text, &fence),
            key
        );
    }

    #[test]
    fn stored_keys_that_escape_are_refused() {
        for bad in [
            "",
            "../etc/passwd",
            "a//b",
            "/abs",
            "a/../b",
            "a/b c",
            "a/./b",
        ] {
            assert_eq!(StorageKey::from_stored(bad), None, "{bad}");
        }
    }
}
