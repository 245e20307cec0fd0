-- Hosts that register themselves, as the SQLite schema (0007 there): each host's agent key hash,
-- state, facts (JSON) and reachability, and the hosts' events. Times are microseconds since the
-- epoch, as there, so one set of queries serves both stores.
CREATE TABLE agent_host (
  host          text PRIMARY KEY,
  key_hash      text NOT NULL,
  fingerprint   text NOT NULL,
  state         text NOT NULL CHECK (state IN ('pending', 'accepted')),
  facts         text NOT NULL,
  registered_us bigint NOT NULL,
  last_seen_us  bigint NOT NULL,
  reachable     boolean NOT NULL,
  hung          boolean NOT NULL
);
CREATE TABLE host_event (
  seq      bigserial PRIMARY KEY,
  at_us    bigint NOT NULL,
  host     text NOT NULL,
  kind     text NOT NULL CHECK (kind IN ('registered', 'accepted', 'forgotten', 'facts_changed', 'unreachable', 'hung', 'reachable')),
  detail   text NOT NULL,
  bookings text NOT NULL
);
CREATE INDEX host_event_host ON host_event (host, seq);
