-- Live workers, for operators: each worker process upserts its row every few seconds
-- (slots, busy slots, queues) and deletes it when it stops; a row not seen for a while
-- belongs to a worker that died. Nothing in the job path reads this table.
CREATE TABLE workers (
    id            text PRIMARY KEY CHECK (char_length(id) <= 200),
    host          text NOT NULL CHECK (char_length(host) <= 255),
    pid           integer NOT NULL,
    slots         integer NOT NULL CHECK (slots >= 0),
    busy          integer NOT NULL CHECK (busy >= 0),
    queues        text[] NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT now(),
    last_seen_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workers_last_seen_idx ON workers (last_seen_at);
