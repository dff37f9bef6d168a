//! Every job type, one file each. Adding a type: write its file (a payload struct that
//! implements `BackgroundJob`), add ONE line below, and regenerate `docs/jobs.md`
//! (`QUIRE_BLESS=1 cargo test -p quire-shared docs_jobs_md`).

/// Declares each type's module, re-exports its payload struct and registers it.
macro_rules! job_types {
    ($( $(#[$attr:meta])* $module:ident :: $job:ident ),* $(,)?) => {
        $( $(#[$attr])* mod $module; )*
        $( $(#[$attr])* pub use $module::$job; )*

        /// Every job type this build has, in registration order.
        pub(super) static REGISTERED: &[&dyn super::Runnable] = &[
            $( $(#[$attr])* &super::registry::Entry::<$job>::NEW, )*
        ];
    };
}

job_types! {
    analyze_document::AnalyzeDocument,
    verify_document::VerifyDocument,
    purge_document::PurgeDocument,
    provision_tenant::ProvisionTenant,
    delete_tenant::DeleteTenant,
    bench_noop::BenchNoop,
    deliver_webhook::DeliverWebhook,
    #[cfg(feature = "fault-injection")]
    fault_test::FaultTest,
}
