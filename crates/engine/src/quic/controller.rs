//! quinn's `Controller` over a controller of ours whose state is kept apart from quinn's types (so
//! that the tests can drive it with a model of a path): the trait both `-C bbr` and `-C udt`
//! implement, and the one adapter that hands their answers to quinn.

use std::any::Any;
use std::time::Instant;

use quinn::congestion::Controller;
use quinn_proto::RttEstimator;

/// What a controller of ours answers to quinn's events.
pub(crate) trait WindowControl: std::fmt::Debug + Clone + Send + Sync + 'static {
    /// One packet of `bytes` sent at `sent`, acknowledged at `now`.
    fn acked(&mut self, now: Instant, sent: Instant, bytes: u64, rtt: &RttEstimator);
    /// The end of one acknowledgement's packets.
    fn acks_ended(&mut self, now: Instant, in_flight: u64, app_limited: bool);
    /// A loss of a packet sent at `sent` outside the current recovery period.
    fn congested(&mut self, now: Instant, sent: Instant, persistent: bool, lost_bytes: u64);
    fn mtu_changed(&mut self, mtu: u16);
    fn current_window(&self) -> u64;
    fn first_window(&self) -> u64;
}

/// A [`WindowControl`] as quinn's controller.
#[derive(Debug, Clone)]
pub(crate) struct Quinn<C>(pub(crate) C);

impl<C: WindowControl> Controller for Quinn<C> {
    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        _app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.0.acked(now, sent, bytes, rtt);
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        _largest_packet_num_acked: Option<u64>,
    ) {
        self.0.acks_ended(now, in_flight, app_limited);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        self.0
            .congested(now, sent, is_persistent_congestion, lost_bytes);
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.0.mtu_changed(new_mtu);
    }

    fn window(&self) -> u64 {
        self.0.current_window()
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        self.0.first_window()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}
