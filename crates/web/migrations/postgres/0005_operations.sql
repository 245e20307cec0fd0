-- The operations log, as the SQLite schema (0005 there): every attempt to operate a host, allowed or
-- refused; an allowed one is written 'pending' before the BMC is asked and completed after. No BMC
-- credentials are stored here.
CREATE TABLE operation (
  seq      bigserial PRIMARY KEY,
  at       timestamptz NOT NULL,
  actor    text NOT NULL,
  role     text NOT NULL,
  host     text NOT NULL,
  action   text NOT NULL,
  reason   text,
  allowed  boolean NOT NULL,
  grounds  text NOT NULL,
  result   text NOT NULL CHECK (result IN ('pending', 'ok', 'failed', 'refused')),
  state    text,
  detail   text
);
CREATE INDEX operation_host ON operation (host, seq);
