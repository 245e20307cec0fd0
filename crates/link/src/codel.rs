//! CoDel (RFC 8289, "Controlled Delay Active Queue Management") evaluated at
//! arrival time.
//!
//! RFC 8289 decides at dequeue, from each packet's sojourn time (dequeue time
//! minus enqueue time). At this model's bottleneck service is deterministic
//! and FIFO: when a segment arrives, the work ahead of it (earlier segments
//! and cross-traffic bytes) is known, so its dequeue time (when its
//! serialization starts) and its sojourn are known then, and dequeues happen
//! in arrival order at non-decreasing times. Running the dequeue-side state
//! machine once per segment, in arrival order, at that segment's dequeue time
//! therefore visits the same (time, sojourn) sequence as a dequeue-side
//! implementation would. A dropped segment never occupies the serializer.
//! Two approximations: the "queue holds at most one MTU" exemption uses the
//! bytes ahead of the segment (the bytes behind it at dequeue are not yet
//! known), and a segment CoDel drops stops occupying queue space at once,
//! not at its dequeue time.
//!
//! The per-packet form of RFC 8289 §5.6's `dequeue` loop: in the dropping
//! state a packet is dropped when `now ≥ drop_next`, after which `count`
//! grows and `drop_next` advances by the control law interval/√count; a
//! packet whose sojourn is back under target ends the dropping state.

use longhaul_units::Nanos;

/// CoDel's state for one queue.
#[derive(Debug, Clone)]
pub(crate) struct Codel {
    target: Nanos,
    interval: Nanos,
    /// When the sojourn will have been above target for an interval; `None`
    /// while below target.
    first_above: Option<Nanos>,
    dropping: bool,
    drop_next: Nanos,
    count: u32,
    last_count: u32,
}

impl Codel {
    pub(crate) fn new(target: Nanos, interval: Nanos) -> Self {
        Self {
            target,
            interval,
            first_above: None,
            dropping: false,
            drop_next: Nanos::ZERO,
            count: 0,
            last_count: 0,
        }
    }

    /// `t + interval / √count` (RFC 8289 §5.5), rounded to the nanosecond.
    fn control_law(&self, t: Nanos, count: u32) -> Nanos {
        let step = self.interval.as_nanos() as f64 / f64::from(count.max(1)).sqrt();
        t + Nanos(step.round() as u64)
    }

    /// RFC 8289 `dodequeue`'s decision: may this packet be dropped?
    fn ok_to_drop(&mut self, now: Nanos, sojourn: Nanos, small_queue: bool) -> bool {
        if sojourn < self.target || small_queue {
            self.first_above = None;
            return false;
        }
        match self.first_above {
            None => {
                self.first_above = Some(now + self.interval);
                false
            }
            Some(t) => now >= t,
        }
    }

    /// Decides for the packet dequeued at `now` after waiting `sojourn`;
    /// `small_queue` is true when at most one MTU is queued. True means drop.
    pub(crate) fn on_dequeue(&mut self, now: Nanos, sojourn: Nanos, small_queue: bool) -> bool {
        let ok = self.ok_to_drop(now, sojourn, small_queue);
        if self.dropping {
            if !ok {
                self.dropping = false;
                return false;
            }
            if now >= self.drop_next {
                self.count = self.count.saturating_add(1);
                self.drop_next = self.control_law(self.drop_next, self.count);
                return true;
            }
            false
        } else if ok {
            self.dropping = true;
            // Re-enter with the previous drop rate if dropping stopped only
            // recently (RFC 8289 §5.6).
            let delta = self.count.saturating_sub(self.last_count);
            self.count = if delta > 1 && now.saturating_sub(self.drop_next) < self.interval_x16() {
                delta
            } else {
                1
            };
            self.drop_next = self.control_law(now, self.count);
            self.last_count = self.count;
            true
        } else {
            false
        }
    }

    fn interval_x16(&self) -> Nanos {
        Nanos(self.interval.as_nanos().saturating_mul(16))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_only_after_an_interval_above_target() {
        let ms = Nanos::from_millis;
        let mut c = Codel::new(ms(5), ms(100));
        // Below target: never.
        assert!(!c.on_dequeue(ms(0), ms(4), false));
        // Above target from 10 ms: first drop at or after 110 ms.
        assert!(!c.on_dequeue(ms(10), ms(6), false));
        assert!(!c.on_dequeue(ms(109), ms(6), false));
        assert!(c.on_dequeue(ms(110), ms(6), false));
        // Next drop 100 ms later (count 1), then 100/√2 ms after that.
        assert!(!c.on_dequeue(ms(209), ms(6), false));
        assert!(c.on_dequeue(ms(210), ms(6), false));
        assert!(!c.on_dequeue(ms(280), ms(6), false));
        assert!(c.on_dequeue(ms(281), ms(6), false));
        // Back under target: dropping stops.
        assert!(!c.on_dequeue(ms(400), ms(1), false));
        assert!(!c.dropping);
        // The small-queue exemption.
        assert!(!c.on_dequeue(ms(900), ms(50), true));
    }
}
