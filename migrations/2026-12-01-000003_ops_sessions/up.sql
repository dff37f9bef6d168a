-- Dashboard sessions (/ops). The cookie carries a random secret; only its SHA-256 is
-- stored, so reading this table opens no session. A session ends at `expires_at`
-- (never later than the operator token that opened it), at logout, or when an
-- operator revokes it (`quire-admin sessions revoke`); expired rows are pruned by the
-- dispatcher's retention.
CREATE TABLE ops_sessions (
    id                uuid PRIMARY KEY,
    secret_sha256     bytea NOT NULL UNIQUE CHECK (octet_length(secret_sha256) = 32),
    operator          text NOT NULL,
    -- The opening token's `jti` (tokens minted before it existed have none).
    token_id          text,
    token_expires_at  timestamptz NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    expires_at        timestamptz NOT NULL,
    CHECK (expires_at <= token_expires_at)
);
CREATE INDEX ops_sessions_expires_idx ON ops_sessions (expires_at);
CREATE INDEX ops_sessions_operator_idx ON ops_sessions (operator);
