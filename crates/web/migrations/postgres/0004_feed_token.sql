-- Calendar feed tokens, as the SQLite schema (0004 there): one per user, read-only, for the iCal feeds'
-- `?token=` only; the BLAKE3 hash is stored; a new one replaces the row, revoking deletes it; it works
-- only while its user has a valid API token.
CREATE TABLE feed_token (
  username   text PRIMARY KEY,
  hash       text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL
);
