//! The state machines of DESIGN §3 in one place: the states of jobs, outbox events,
//! documents and tenants, stored as text, and the allowed job transitions.

/// A state stored as one of a fixed set of strings (the CHECK constraints of the schema).
macro_rules! text_state {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize, ::diesel::expression::AsExpression, ::diesel::deserialize::FromSqlRow)]
        #[diesel(sql_type = ::diesel::sql_types::Text)]
        pub enum $name {
            $(#[serde(rename = $text)] $variant),+
        }

        impl $name {
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }

            pub fn parse(text: &str) -> Option<Self> {
                match text {
                    $($text => Some(Self::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::diesel::serialize::ToSql<::diesel::sql_types::Text, ::diesel::pg::Pg> for $name {
            fn to_sql<'b>(&'b self, out: &mut ::diesel::serialize::Output<'b, '_, ::diesel::pg::Pg>) -> ::diesel::serialize::Result {
                ::std::io::Write::write_all(out, self.as_str().as_bytes())?;
                Ok(::diesel::serialize::IsNull::No)
            }
        }

        impl ::diesel::deserialize::FromSql<::diesel::sql_types::Text, ::diesel::pg::Pg> for $name {
            fn from_sql(value: ::diesel::pg::PgValue<'_>) -> ::diesel::deserialize::Result<Self> {
                let text = std::str::from_utf8(value.as_bytes())?;
                Self::parse(text).ok_or_else(|| {
                    format!(concat!("unknown ", stringify!($name), " {:?}"), text).into()
                })
            }
        }
    };
}
pub(crate) use text_state;

text_state!(
    /// Where a processing job stands; PostgreSQL is the only truth about it.
    JobStatus {
        Queued => "QUEUED",
        Running => "RUNNING",
        Succeeded => "SUCCEEDED",
        Failed => "FAILED",
        Cancelled => "CANCELLED",
    }
);

text_state!(
    /// Delivery state of one outbox event, separate from the job's execution state.
    EventStatus {
        Pending => "PENDING",
        Publishing => "PUBLISHING",
        Published => "PUBLISHED",
        Cancelled => "CANCELLED",
    }
);

text_state!(
    /// Content readiness of a document, not queue state.
    DocumentStatus {
        Pending => "PENDING",
        Processing => "PROCESSING",
        Ready => "READY",
        Failed => "FAILED",
    }
);

text_state!(
    /// Lifecycle of a tenant.
    TenantStatus {
        Creating => "creating",
        Active => "active",
        Suspended => "suspended",
        Deleting => "deleting",
    }
);

impl JobStatus {
    /// The transition table of DESIGN §3. Every guarded UPDATE in the job storage module
    /// moves a job along one of these edges.
    pub fn can_transition_to(self, to: JobStatus) -> bool {
        use JobStatus::*;
        matches!(
            (self, to),
            (Queued, Running)
                | (Queued, Cancelled)
                | (Running, Succeeded)
                | (Running, Failed)
                | (Running, Queued)
                | (Running, Cancelled)
                | (Failed, Queued)
        )
    }

    /// A job in this state will not run again unless someone acts on it.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }
}

impl EventStatus {
    pub fn can_transition_to(self, to: EventStatus) -> bool {
        use EventStatus::*;
        matches!(
            (self, to),
            (Pending, Publishing)
                | (Publishing, Published)
                | (Publishing, Pending)
                | (Pending, Cancelled)
                | (Publishing, Cancelled)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_transitions_match_the_design_table() {
        use JobStatus::*;
        let allowed = [
            (Queued, Running),
            (Queued, Cancelled),
            (Running, Succeeded),
            (Running, Failed),
            (Running, Queued),
            (Running, Cancelled),
            (Failed, Queued),
        ];
        for &from in JobStatus::ALL {
            for &to in JobStatus::ALL {
                assert_eq!(
                    from.can_transition_to(to),
                    allowed.contains(&(from, to)),
                    "{from} -> {to}"
                );
            }
        }
    }

    #[test]
    fn finished_jobs_never_move_except_a_failed_retry() {
        for &to in JobStatus::ALL {
            assert!(!JobStatus::Succeeded.can_transition_to(to));
            assert!(!JobStatus::Cancelled.can_transition_to(to));
        }
        assert!(JobStatus::Failed.can_transition_to(JobStatus::Queued));
    }

    #[test]
    fn event_transitions_match_the_design() {
        use EventStatus::*;
        assert!(Pending.can_transition_to(Publishing));
        assert!(Publishing.can_transition_to(Pending));
        assert!(!Published.can_transition_to(Pending));
        assert!(!Cancelled.can_transition_to(Pending));
        assert!(!Pending.can_transition_to(Published));
    }

    #[test]
    fn states_round_trip_through_their_text() {
        for &status in JobStatus::ALL {
            assert_eq!(JobStatus::parse(status.as_str()), Some(status));
        }
        for &status in TenantStatus::ALL {
            assert_eq!(TenantStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(JobStatus::parse("queued"), None);
    }
}
