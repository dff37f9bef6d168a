-- How a tenant's documents are dated (issue 18, item 4): the languages month names are
-- read in and the order of an ambiguous numeric date, each NULL for the configuration's
-- `analysis.date_languages` / `analysis.date_order`. Constant (NULL) defaults: no table
-- rewrite. The CHECKs say what `actions::settings` checks first, to answer clearly.
ALTER TABLE tenants
    ADD COLUMN date_languages text[]
        CHECK (cardinality(date_languages) BETWEEN 1 AND 7
               AND date_languages <@ ARRAY['en', 'de', 'fr', 'es', 'it', 'nl', 'pt']),
    ADD COLUMN date_order text
        CHECK (date_order IN ('dmy', 'mdy', 'ymd'));
