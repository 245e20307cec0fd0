-- Declining an approval and revoking tokens. A declined booking is stored as 'cancelled' (it ended
-- before it started and blocks nothing) with the decliner in declined_by and the reason for its owner
-- in notice; its approval column keeps 'pending' (it was never approved). The CHECK constraints of
-- status and approval stay as they are: SQLite cannot change a constraint without rebuilding the
-- table. A revoked token keeps its row (for `token list`) with the time of revocation.
ALTER TABLE booking ADD COLUMN declined_by TEXT;
ALTER TABLE token ADD COLUMN revoked_at_us INTEGER;
