-- Document versions (issue 18): a document gets new versions after its first. Each
-- version has its number within its document and its own readiness; a new version is
-- analyzed while the previous one stays current, and becomes current with its
-- analysis's success.

-- The last number given to a version of the document. A new version takes the next one
-- by a guarded `UPDATE … SET last_version_number = last_version_number + 1 … RETURNING`,
-- which serialises concurrent uploads on the document row: each gets its own number.
ALTER TABLE documents ADD COLUMN last_version_number integer NOT NULL DEFAULT 1
    CHECK (last_version_number >= 1);

-- `number`: 1 for a document's first version (the intake writes no number: the default
-- says it), the document's next number for every later one.
-- `status`: the version's readiness, the document's status values (the document's own
-- status is its current version's). `processing_error`: safe, bounded, as the document's.
-- `findings_text`, `findings_issued_at`: what an analysis found, held between the
-- pipeline's fenced index step and the job's success transaction, which copies them to
-- the document when it makes the version current and clears them.
ALTER TABLE document_versions
    ADD COLUMN number integer NOT NULL DEFAULT 1 CHECK (number >= 1),
    ADD COLUMN status text NOT NULL DEFAULT 'PENDING'
        CHECK (status IN ('PENDING', 'PROCESSING', 'READY', 'FAILED')),
    ADD COLUMN processing_error text CHECK (char_length(processing_error) <= 500),
    ADD COLUMN findings_text text,
    ADD COLUMN findings_issued_at date;

-- Until now a document had one version; number any that has more in upload order.
UPDATE document_versions AS v SET number = n.number
FROM (SELECT id, row_number() OVER (PARTITION BY document_id ORDER BY created_at, id) AS number
      FROM document_versions) AS n
WHERE v.id = n.id AND n.number > 1;
UPDATE documents AS d SET last_version_number = m.number
FROM (SELECT document_id, max(number) AS number FROM document_versions GROUP BY document_id) AS m
WHERE d.id = m.document_id AND m.number > 1;
-- A current version is as ready as its document; an older one was analyzed before.
UPDATE document_versions AS v SET status = d.status, processing_error = d.processing_error
FROM documents AS d WHERE d.current_version_id = v.id;
UPDATE document_versions AS v SET status = 'READY'
WHERE NOT EXISTS (SELECT 1 FROM documents AS d WHERE d.current_version_id = v.id);

-- One number per version of a document (also the listing's order).
CREATE UNIQUE INDEX document_versions_document_number_idx
    ON document_versions (document_id, number);
DROP INDEX document_versions_document_idx;
