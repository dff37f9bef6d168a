-- The duplicate rule of an upload (server.reject_duplicate_uploads) in one place: the
-- same bytes as the current version of a live document of the tenant. It takes the
-- advisory lock that serialises uploads of the same bytes in the tenant, held to the end
-- of the caller's transaction, and only then looks: a VOLATILE function's statements
-- each take a snapshot of their own (READ COMMITTED), so the lookup sees an upload of the
-- same bytes that committed while this one waited for the lock. That is what lets an
-- upload lock, look and write in ONE statement (`db::intake::record_new_content`), where
-- it took a transaction of five round trips (BEGIN, lock, lookup, intake, COMMIT).
-- The lock's key is the one the two-statement form took, so old and new processes of a
-- deploy serialise against each other.
CREATE OR REPLACE FUNCTION quire_same_content(tenant uuid, content_sha256 text) RETURNS uuid
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    existing uuid;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(tenant::text || ':' || content_sha256, 42));
    SELECT d.id INTO existing
    FROM document_versions AS v JOIN documents AS d ON d.current_version_id = v.id
    WHERE v.tenant_id = tenant AND v.sha256 = content_sha256 AND d.tenant_id = tenant
      AND d.trashed_at IS NULL
    LIMIT 1;
    RETURN existing;
END
$$;
