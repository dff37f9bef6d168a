DROP TABLE document_tag_removals;
ALTER TABLE documents
    DROP CONSTRAINT documents_correspondent_automatic_check,
    DROP CONSTRAINT documents_correspondent_chooser_check,
    DROP COLUMN correspondent_set_by_user,
    DROP COLUMN correspondent_automatic;
ALTER TABLE document_tags DROP COLUMN automatic;
DROP INDEX correspondents_with_rule_idx;
DROP INDEX tags_with_rule_idx;
ALTER TABLE correspondents
    DROP COLUMN match_case_insensitive,
    DROP COLUMN match_text,
    DROP COLUMN match_algorithm;
ALTER TABLE tags
    DROP COLUMN match_case_insensitive,
    DROP COLUMN match_text,
    DROP COLUMN match_algorithm;
