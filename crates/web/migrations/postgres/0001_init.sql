-- longhaul testbed, PostgreSQL schema (docs/testbed.md §5). Times are timestamptz (microseconds); the
-- service passes them as bigint microseconds since the epoch through lh_us / lh_us_of.
CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE FUNCTION lh_us(us bigint) RETURNS timestamptz
  LANGUAGE sql STABLE STRICT AS $$ SELECT timestamptz '1970-01-01 00:00:00+00' + us * interval '1 microsecond' $$;
CREATE FUNCTION lh_us_of(t timestamptz) RETURNS bigint
  LANGUAGE sql STABLE STRICT AS $$ SELECT (extract(epoch FROM t) * 1000000)::bigint $$;

CREATE TABLE resource (
  id           text PRIMARY KEY,
  parent       text REFERENCES resource(id),
  kind         text NOT NULL,
  name         text NOT NULL,
  capacity_bps bigint,
  state        text NOT NULL DEFAULT 'available',
  reason       text,
  zone         text
);

CREATE TABLE booking (
  id           bigserial PRIMARY KEY,
  resource     text NOT NULL REFERENCES resource(id),
  owner        text NOT NULL,
  during       tstzrange NOT NULL CHECK (NOT isempty(during) AND lower_inc(during) AND NOT upper_inc(during)),
  status       text NOT NULL CHECK (status IN ('held','confirmed','released','cancelled','expired','preempted')),
  hold_until   timestamptz CHECK ((status = 'held') = (hold_until IS NOT NULL)),
  status_at    timestamptz,            -- when released, cancelled, expired or preempted
  preempted_by text,
  notice       text,
  note         text NOT NULL DEFAULT '',
  created_at   timestamptz NOT NULL,
  version      int NOT NULL DEFAULT 1
);
CREATE INDEX booking_owner ON booking (owner);
CREATE INDEX booking_resource ON booking (resource);

-- One row per live booking and ancestor-or-self of its resource; the two exclusion constraints are the
-- "no double booking" rule, hierarchy included.
CREATE TABLE claim (
  booking  bigint    NOT NULL REFERENCES booking(id) ON DELETE CASCADE,
  resource text      NOT NULL REFERENCES resource(id),
  exact    smallint  NOT NULL CHECK (exact IN (0, 1)),
  during   tstzrange NOT NULL,
  PRIMARY KEY (booking, resource),
  CONSTRAINT same_resource EXCLUDE USING gist (resource WITH =, during WITH &&) WHERE (exact = 1),
  CONSTRAINT parent_child  EXCLUDE USING gist (resource WITH =, during WITH &&, exact WITH <>)
);

CREATE TABLE audit (
  seq     bigserial PRIMARY KEY,
  at      timestamptz NOT NULL,
  actor   text NOT NULL,
  role    text NOT NULL,
  action  text NOT NULL,
  booking bigint NOT NULL REFERENCES booking(id),
  before  jsonb,
  after   jsonb NOT NULL
);

CREATE TABLE idempotency (
  owner      text NOT NULL,
  key        text NOT NULL,
  method     text NOT NULL,
  path       text NOT NULL,
  body_hash  text NOT NULL,
  created_at timestamptz NOT NULL,
  status     int,                      -- NULL while the first request runs (never visible: same transaction)
  response   text,
  PRIMARY KEY (owner, key)
);

CREATE TABLE token (
  hash       text PRIMARY KEY,         -- BLAKE3 of the token; the token itself is never stored
  username   text NOT NULL,
  role       text NOT NULL CHECK (role IN ('user','approver','admin')),
  created_at timestamptz NOT NULL
);
