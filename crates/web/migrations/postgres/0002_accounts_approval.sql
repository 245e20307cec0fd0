-- Issue 6, second step: a display zone per account, the approval workflow, faster audit and sweep reads.
-- A booking that needs approval (an event beyond the horizon) is stored as a hold until its start with
-- approval = 'pending': its claims block others while an approver decides; it expires at its start
-- otherwise.
ALTER TABLE token ADD COLUMN zone text;
ALTER TABLE booking ADD COLUMN approval text CHECK (approval IN ('pending', 'approved'));
CREATE INDEX audit_booking ON audit (booking, seq);
CREATE INDEX booking_status_hold ON booking (status, hold_until);
