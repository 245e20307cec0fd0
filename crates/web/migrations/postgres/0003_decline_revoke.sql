-- Declining an approval and revoking tokens, as the SQLite schema (0003 there): a declined booking is
-- 'cancelled' (no claims) with the decliner in declined_by and the reason for its owner in notice;
-- its approval column keeps 'pending'. A revoked token keeps its row with the time of revocation.
ALTER TABLE booking ADD COLUMN declined_by text;
ALTER TABLE token ADD COLUMN revoked_at timestamptz;
