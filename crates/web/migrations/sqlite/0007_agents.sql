-- Hosts that register themselves (issue 20): each host's agent key (its BLAKE3 hash only; the key
-- stays on the host), its state (pending until an admin accepts it), its facts as last reported
-- (JSON), and whether its heartbeats arrive; and the hosts' events (registered, accepted,
-- forgotten, facts changed, unreachable, hung, reachable) with the bookings covering the host then.
-- Times are microseconds since the epoch.
CREATE TABLE agent_host (
  host          TEXT PRIMARY KEY,
  key_hash      TEXT NOT NULL,
  fingerprint   TEXT NOT NULL,
  state         TEXT NOT NULL CHECK (state IN ('pending', 'accepted')),
  facts         TEXT NOT NULL,
  registered_us INTEGER NOT NULL,
  last_seen_us  INTEGER NOT NULL,
  reachable     INTEGER NOT NULL CHECK (reachable IN (0, 1)),
  hung          INTEGER NOT NULL CHECK (hung IN (0, 1))
);
CREATE TABLE host_event (
  seq      INTEGER PRIMARY KEY AUTOINCREMENT,
  at_us    INTEGER NOT NULL,
  host     TEXT NOT NULL,
  kind     TEXT NOT NULL CHECK (kind IN ('registered', 'accepted', 'forgotten', 'facts_changed', 'unreachable', 'hung', 'reachable')),
  detail   TEXT NOT NULL,
  bookings TEXT NOT NULL
);
CREATE INDEX host_event_host ON host_event (host, seq);
