-- The analyze pipeline's output: assets per version (thumbnail, extracted text), the
-- document's extracted text and its full-text search vector.

CREATE TABLE assets (
    id            uuid PRIMARY KEY,
    tenant_id     uuid NOT NULL REFERENCES tenants (id),
    document_id   uuid NOT NULL REFERENCES documents (id),
    version_id    uuid NOT NULL REFERENCES document_versions (id),
    kind          text NOT NULL CHECK (kind IN ('thumbnail', 'text')),
    storage_key   text NOT NULL UNIQUE,
    size_bytes    bigint NOT NULL CHECK (size_bytes >= 0),
    sha256        text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    content_type  text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    -- Keyed by version and kind: a re-run replaces, never duplicates.
    UNIQUE (version_id, kind)
);
CREATE INDEX assets_tenant_idx ON assets (tenant_id);
CREATE INDEX assets_document_idx ON assets (document_id);

ALTER TABLE documents ADD COLUMN content_text text;
ALTER TABLE documents ADD COLUMN search_vector tsvector;
CREATE INDEX documents_search_idx ON documents USING GIN (search_vector);

-- Recomputes one document's search vector from its title (weight A), tags and
-- correspondent (B) and extracted text (C), with its tenant's text search configuration.
-- Called by the pipeline's index step and by every metadata edit, in their transactions.
CREATE FUNCTION quire_reindex_document(doc uuid) RETURNS void
LANGUAGE sql AS $$
    UPDATE documents d
    SET search_vector =
          setweight(to_tsvector(x.cfg, d.title), 'A')
       || setweight(to_tsvector(x.cfg, coalesce((
              SELECT string_agg(t.name, ' ') FROM document_tags dt JOIN tags t ON t.id = dt.tag_id
              WHERE dt.document_id = d.id), '')), 'B')
       || setweight(to_tsvector(x.cfg, coalesce((
              SELECT c.name FROM correspondents c WHERE c.id = d.correspondent_id), '')), 'B')
       || setweight(to_tsvector(x.cfg, coalesce(d.content_text, '')), 'C')
    FROM (
        SELECT coalesce(
            (SELECT s.language FROM search_indexes s
             JOIN documents d2 ON d2.tenant_id = s.tenant_id WHERE d2.id = doc),
            'simple')::regconfig AS cfg
    ) x
    WHERE d.id = doc
$$;
