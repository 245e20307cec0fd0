-- The console archive, as the SQLite schema (0006 there): every console line read, its time, boot
-- and mark; bounded by age and by count per host by the service's sweep.
CREATE TABLE console_line (
  seq    bigserial PRIMARY KEY,
  host   text NOT NULL,
  at     timestamptz NOT NULL,
  boot   bigint NOT NULL CHECK (boot >= 0),
  mark   text CHECK (mark IN ('boot', 'oops', 'panic')),
  line   text NOT NULL
);
CREATE INDEX console_line_host ON console_line (host, seq);
CREATE INDEX console_line_boot ON console_line (host, boot, seq);
