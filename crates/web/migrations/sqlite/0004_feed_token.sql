-- Calendar feed tokens (issue 11): one per user, read-only, for the iCal feeds' `?token=` only, so that
-- a calendar URL is no longer an API credential. Stored as the BLAKE3 hash, like API tokens. Making a
-- new one replaces the row (rotation); revoking deletes it. A feed token works only while its user
-- has a valid API token (checked at every request), so revoking a user's API tokens ends their feed.
CREATE TABLE feed_token (
  username      TEXT PRIMARY KEY,
  hash          TEXT NOT NULL UNIQUE,
  created_at_us INTEGER NOT NULL
);
