//! Hand-written SQL that each connection prepares once and then only binds and runs.
//!
//! `diesel::sql_query` marks every statement unsafe to cache, so each call costs a
//! `Parse` round trip and a fresh plan before its `Bind`/`Execute`: on the hot path of a
//! job that was a third of the time PostgreSQL spent on it. A statement whose text is a
//! constant can be cached by that text; [`Prepared::prepared`] says so.
//!
//! Only for statements whose result columns are listed by name: a cached `SELECT *` or
//! `RETURNING *` fails with "cached plan must not change result type" once a migration
//! adds a column while the process runs.

use diesel::QueryResult;
use diesel::pg::Pg;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};

/// A statement the connection keeps prepared, keyed by its SQL text and bind types.
#[derive(Debug, Clone, Copy)]
#[must_use = "Queries are only executed when calling `load`, `get_result` or similar."]
pub struct Cached<Q>(Q);

/// Marks a `diesel::sql_query(..).bind(..)` chain with constant SQL as cacheable.
pub trait Prepared: Sized {
    fn prepared(self) -> Cached<Self> {
        Cached(self)
    }
}

impl<Q: QueryFragment<Pg> + Query> Prepared for Q {}

impl<Q: QueryFragment<Pg>> QueryFragment<Pg> for Cached<Q> {
    fn walk_ast<'b>(&'b self, pass: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        self.0.walk_ast(pass)
    }

    fn is_safe_to_cache_prepared(&self, _backend: &Pg) -> QueryResult<bool> {
        Ok(true)
    }
}

impl<Q> QueryId for Cached<Q> {
    type QueryId = ();
    // No static id: the cache keys the statement by its SQL text and bind types.
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<Q: Query> Query for Cached<Q> {
    type SqlType = Q::SqlType;
}

impl<Q, Conn> diesel::RunQueryDsl<Conn> for Cached<Q> {}
