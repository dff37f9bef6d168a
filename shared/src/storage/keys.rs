//! Storage keys, generated from ids only.

use uuid::Uuid;

use crate::db::assets::AssetKind;

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

    /// `tenants/{tenant}/documents/{doc}/versions/{ver}/{kind}`: one asset (thumbnail,
    /// text) of a version; a re-run writes the same key again.
    pub fn version_asset(
        tenant_id: Uuid,
        document_id: Uuid,
        version_id: Uuid,
        kind: AssetKind,
    ) -> Self {
        Self(format!(
            "tenants/{tenant_id}/documents/{document_id}/versions/{version_id}/{}",
            kind.as_str()
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
