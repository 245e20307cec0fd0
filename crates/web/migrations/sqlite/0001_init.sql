-- longhaul testbed, SQLite schema (docs/testbed.md §5). Times are INTEGER microseconds since the epoch.
-- Writers use BEGIN IMMEDIATE + a conflict query; the triggers below are the backstop for any writer.
CREATE TABLE resource (
  id           TEXT PRIMARY KEY,
  parent       TEXT REFERENCES resource(id),
  kind         TEXT NOT NULL,
  name         TEXT NOT NULL,
  capacity_bps INTEGER,
  state        TEXT NOT NULL DEFAULT 'available',
  reason       TEXT,
  zone         TEXT
);

CREATE TABLE booking (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  resource      TEXT NOT NULL REFERENCES resource(id),
  owner         TEXT NOT NULL,
  start_us      INTEGER NOT NULL,
  end_us        INTEGER NOT NULL CHECK (end_us > start_us),
  status        TEXT NOT NULL CHECK (status IN ('held','confirmed','released','cancelled','expired','preempted')),
  hold_until_us INTEGER CHECK ((status = 'held') = (hold_until_us IS NOT NULL)),
  status_at_us  INTEGER,
  preempted_by  TEXT,
  notice        TEXT,
  note          TEXT NOT NULL DEFAULT '',
  created_at_us INTEGER NOT NULL,
  updated_at_us INTEGER NOT NULL,
  version       INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX booking_resource_time ON booking (resource, start_us, end_us);
CREATE INDEX booking_owner ON booking (owner);

-- The rule, for any writer: no two live bookings on conflicting resources (same, ancestor, descendant)
-- overlap. "now" for hold expiry is the writer's updated_at_us.
CREATE TRIGGER booking_no_overlap_insert BEFORE INSERT ON booking
WHEN NEW.status = 'confirmed' OR (NEW.status = 'held' AND NEW.hold_until_us > NEW.updated_at_us)
BEGIN
  SELECT RAISE(ABORT, 'conflict') WHERE EXISTS (
    SELECT 1 FROM booking b
     WHERE (b.status = 'confirmed' OR (b.status = 'held' AND b.hold_until_us > NEW.updated_at_us))
       AND b.start_us < NEW.end_us AND b.end_us > NEW.start_us
       AND (b.resource = NEW.resource
            OR substr(NEW.resource, 1, length(b.resource) + 1) = b.resource || '/'
            OR substr(b.resource, 1, length(NEW.resource) + 1) = NEW.resource || '/'));
END;

CREATE TRIGGER booking_no_overlap_update BEFORE UPDATE OF end_us, status ON booking
WHEN NEW.status = 'confirmed' OR (NEW.status = 'held' AND NEW.hold_until_us > NEW.updated_at_us)
BEGIN
  SELECT RAISE(ABORT, 'conflict') WHERE EXISTS (
    SELECT 1 FROM booking b
     WHERE b.id <> NEW.id
       AND (b.status = 'confirmed' OR (b.status = 'held' AND b.hold_until_us > NEW.updated_at_us))
       AND b.start_us < NEW.end_us AND b.end_us > NEW.start_us
       AND (b.resource = NEW.resource
            OR substr(NEW.resource, 1, length(b.resource) + 1) = b.resource || '/'
            OR substr(b.resource, 1, length(NEW.resource) + 1) = NEW.resource || '/'));
END;

CREATE TABLE audit (
  seq     INTEGER PRIMARY KEY AUTOINCREMENT,
  at_us   INTEGER NOT NULL,
  actor   TEXT NOT NULL,
  role    TEXT NOT NULL,
  action  TEXT NOT NULL,
  booking INTEGER NOT NULL REFERENCES booking(id),
  before  TEXT,
  after   TEXT NOT NULL
);

CREATE TABLE idempotency (
  owner         TEXT NOT NULL,
  key           TEXT NOT NULL,
  method        TEXT NOT NULL,
  path          TEXT NOT NULL,
  body_hash     TEXT NOT NULL,
  created_at_us INTEGER NOT NULL,
  status        INTEGER,
  response      TEXT,
  PRIMARY KEY (owner, key)
);

CREATE TABLE token (
  hash          TEXT PRIMARY KEY,
  username      TEXT NOT NULL,
  role          TEXT NOT NULL CHECK (role IN ('user','approver','admin')),
  created_at_us INTEGER NOT NULL
);
