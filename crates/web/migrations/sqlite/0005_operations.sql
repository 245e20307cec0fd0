-- The operations log (issue 20): every attempt to operate a host (power now, console later), allowed
-- or refused, with who, what, when, why and the BMC's answer. An allowed attempt is written before the
-- BMC is asked (result 'pending') and completed after, so a crash mid-operation still leaves a trace.
-- BMC credentials never reach this table: `detail` holds the BMC's answers or an error that names the
-- endpoint without them.
CREATE TABLE operation (
  seq      INTEGER PRIMARY KEY AUTOINCREMENT,
  at_us    INTEGER NOT NULL,
  actor    TEXT NOT NULL,
  role     TEXT NOT NULL,
  host     TEXT NOT NULL,
  action   TEXT NOT NULL,
  reason   TEXT,
  allowed  INTEGER NOT NULL CHECK (allowed IN (0, 1)),
  grounds  TEXT NOT NULL,
  result   TEXT NOT NULL CHECK (result IN ('pending', 'ok', 'failed', 'refused')),
  state    TEXT,
  detail   TEXT
);
CREATE INDEX operation_host ON operation (host, seq);
