-- Matching rules (issue 18, item 5): a tag or correspondent may name the documents it
-- belongs on by their text. A label a rule set is marked automatic; a label the user set
-- or removed is never touched by a rule (docs/decisions.md, "Matching rules").

-- The rule of each tag and correspondent: 'none' (the default: only a user sets it),
-- 'any' word, 'all' words, an 'exact' phrase, a 'regex' or a 'fuzzy' phrase. The text is
-- bounded here as in the API (the cost of applying a rule grows with it).
ALTER TABLE tags
    ADD COLUMN match_algorithm text NOT NULL DEFAULT 'none'
        CHECK (match_algorithm IN ('none', 'any', 'all', 'exact', 'regex', 'fuzzy')),
    ADD COLUMN match_text text NOT NULL DEFAULT '' CHECK (char_length(match_text) <= 256),
    ADD COLUMN match_case_insensitive boolean NOT NULL DEFAULT true;
ALTER TABLE correspondents
    ADD COLUMN match_algorithm text NOT NULL DEFAULT 'none'
        CHECK (match_algorithm IN ('none', 'any', 'all', 'exact', 'regex', 'fuzzy')),
    ADD COLUMN match_text text NOT NULL DEFAULT '' CHECK (char_length(match_text) <= 256),
    ADD COLUMN match_case_insensitive boolean NOT NULL DEFAULT true;
-- The analysis loads only the labels that have a rule.
CREATE INDEX tags_with_rule_idx ON tags (tenant_id) WHERE match_algorithm <> 'none';
CREATE INDEX correspondents_with_rule_idx ON correspondents (tenant_id)
    WHERE match_algorithm <> 'none';

-- A link a rule made (a rule may take it away again); every link before this migration
-- was a user's, which the default says.
ALTER TABLE document_tags ADD COLUMN automatic boolean NOT NULL DEFAULT false;

-- A correspondent a rule set, and whether the user chose the document's correspondent
-- (a name or none): rules own it only while it is automatic, or empty and never chosen.
-- Both default to false, so a correspondent set before this migration (a user's) stays
-- the user's without a backfill: it is neither automatic nor empty.
ALTER TABLE documents
    ADD COLUMN correspondent_automatic boolean NOT NULL DEFAULT false,
    ADD COLUMN correspondent_set_by_user boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT documents_correspondent_chooser_check
        CHECK (NOT (correspondent_automatic AND correspondent_set_by_user)),
    ADD CONSTRAINT documents_correspondent_automatic_check
        CHECK (NOT correspondent_automatic OR correspondent_id IS NOT NULL);

-- The tags a user took off a document: a rule never puts them back. Deleted with the
-- link's document or tag (by the purge, the tag's deletion and the tenant wipe).
CREATE TABLE document_tag_removals (
    document_id  uuid NOT NULL REFERENCES documents (id),
    tag_id       uuid NOT NULL REFERENCES tags (id),
    tenant_id    uuid NOT NULL REFERENCES tenants (id),
    removed_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, tag_id)
);
CREATE INDEX document_tag_removals_tag_idx ON document_tag_removals (tag_id);
CREATE INDEX document_tag_removals_tenant_idx ON document_tag_removals (tenant_id);
