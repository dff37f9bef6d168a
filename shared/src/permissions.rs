//! The permission model of DESIGN §2: a member of a tenant holds one capability set, and
//! a capability set is a list of permissions. The sets and what they grant are defined
//! here once; provision-tenant materializes them per tenant.

use serde::{Deserialize, Serialize};

use crate::states::text_state;

text_state!(
    /// What a request may do inside its tenant.
    Permission {
        DocumentsRead => "documents:read",
        DocumentsWrite => "documents:write",
        MembersManage => "members:manage",
    }
);

text_state!(
    /// The named sets a member can hold.
    CapabilitySet {
        Owner => "owner",
        User => "user",
        Readonly => "readonly",
        Webdav => "webdav",
    }
);

impl CapabilitySet {
    /// The permissions a tenant's set starts with.
    pub fn default_permissions(self) -> &'static [Permission] {
        use Permission::*;
        match self {
            Self::Owner => &[DocumentsRead, DocumentsWrite, MembersManage],
            Self::User => &[DocumentsRead, DocumentsWrite],
            Self::Readonly => &[DocumentsRead],
            // A WebDAV client syncs files both ways but never manages people.
            Self::Webdav => &[DocumentsRead, DocumentsWrite],
        }
    }
}

/// One member as an admin names it when creating a tenant: a bare user id, or a user id
/// with the set it should hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MemberSpec {
    User(uuid::Uuid),
    WithSet {
        user_id: uuid::Uuid,
        capability_set: CapabilitySet,
    },
}

impl MemberSpec {
    pub fn user_id(self) -> uuid::Uuid {
        match self {
            Self::User(user_id) | Self::WithSet { user_id, .. } => user_id,
        }
    }

    /// The set this member gets: as given, else `owner` for the first member and `user`
    /// for the others.
    pub fn capability_set(self, position: usize) -> CapabilitySet {
        match self {
            Self::WithSet { capability_set, .. } => capability_set,
            Self::User(_) if position == 0 => CapabilitySet::Owner,
            Self::User(_) => CapabilitySet::User,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_owners_manage_members_and_readonly_only_reads() {
        for &set in CapabilitySet::ALL {
            let grants = set.default_permissions();
            assert!(grants.contains(&Permission::DocumentsRead), "{set}");
            assert_eq!(
                grants.contains(&Permission::MembersManage),
                set == CapabilitySet::Owner,
                "{set}"
            );
            assert_eq!(
                grants.contains(&Permission::DocumentsWrite),
                set != CapabilitySet::Readonly,
                "{set}"
            );
        }
    }

    #[test]
    fn the_first_bare_member_owns_the_tenant_and_given_sets_win() {
        let (a, b) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
        let members: Vec<MemberSpec> = serde_json::from_value(serde_json::json!([
            a,
            b,
            { "user_id": b, "capability_set": "readonly" }
        ]))
        .expect("members");
        let sets: Vec<_> = members
            .iter()
            .enumerate()
            .map(|(position, member)| member.capability_set(position))
            .collect();
        assert_eq!(
            sets,
            [
                CapabilitySet::Owner,
                CapabilitySet::User,
                CapabilitySet::Readonly
            ]
        );
    }
}
