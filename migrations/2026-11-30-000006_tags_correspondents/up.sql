-- Tags and correspondents, per tenant, named by the user.
CREATE TABLE correspondents (
    id          uuid PRIMARY KEY,
    tenant_id   uuid NOT NULL REFERENCES tenants (id),
    name        text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);

CREATE TABLE tags (
    id          uuid PRIMARY KEY,
    tenant_id   uuid NOT NULL REFERENCES tenants (id),
    name        text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);

CREATE TABLE document_tags (
    document_id  uuid NOT NULL REFERENCES documents (id),
    tag_id       uuid NOT NULL REFERENCES tags (id),
    tenant_id    uuid NOT NULL REFERENCES tenants (id),
    PRIMARY KEY (document_id, tag_id)
);
CREATE INDEX document_tags_tag_idx ON document_tags (tag_id);
CREATE INDEX document_tags_tenant_idx ON document_tags (tenant_id);

ALTER TABLE documents ADD COLUMN correspondent_id uuid REFERENCES correspondents (id);
CREATE INDEX documents_correspondent_idx ON documents (correspondent_id);
