-- Issue 6, second step: a display zone per account, the approval workflow, faster audit and sweep reads.
-- A booking that needs approval (an event beyond the horizon) is stored as a hold until its start with
-- approval = 'pending': it blocks others while an approver decides, and expires at its start otherwise.
ALTER TABLE token ADD COLUMN zone TEXT;
ALTER TABLE booking ADD COLUMN approval TEXT CHECK (approval IN ('pending', 'approved'));
CREATE INDEX audit_booking ON audit (booking, seq);
CREATE INDEX booking_status_hold ON booking (status, hold_until_us);
