-- The console archive (issue 20): every line the service read from a host's serial console or
-- netconsole, with the time it was read, the boot it belongs to (a `Linux version` line starts the
-- next; 0 before the first one seen) and its mark (boot, oops, panic). Lines are escaped and at most
-- 4 KiB (crates/console); the service deletes lines older than --console-days and keeps at most
-- --console-lines per host.
CREATE TABLE console_line (
  seq    INTEGER PRIMARY KEY AUTOINCREMENT,
  host   TEXT NOT NULL,
  at_us  INTEGER NOT NULL,
  boot   INTEGER NOT NULL CHECK (boot >= 0),
  mark   TEXT CHECK (mark IN ('boot', 'oops', 'panic')),
  line   TEXT NOT NULL
);
CREATE INDEX console_line_host ON console_line (host, seq);
CREATE INDEX console_line_boot ON console_line (host, boot, seq);
