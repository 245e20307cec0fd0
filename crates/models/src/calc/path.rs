//! `calc path` (also `calc` without a subcommand): the BDP, Mathis and responsiveness reports of one
//! path at once.

use serde::Serialize;

use super::mathis::{MathisGiven, MathisReport};
use super::{PathInputs, bdp, mathis, responsiveness};

/// What `calc path` reports.
#[derive(Debug, Serialize)]
pub struct PathReport {
    /// `calc bdp` for the path.
    pub bdp: bdp::BdpReport,
    /// `calc mathis`: the ceiling at `loss` when given, else the loss the path's rate needs.
    pub mathis: MathisReport,
    /// `calc responsiveness` at the path's rate.
    pub responsiveness: responsiveness::ResponsivenessReport,
}

/// Computes the `calc path` report; `c` is the Mathis constant, `loss` the path's loss probability if
/// known.
pub fn report(p: &PathInputs, c: f64, loss: Option<f64>) -> PathReport {
    let given = match loss {
        Some(l) => MathisGiven::Loss(l),
        None => MathisGiven::Rate(p.rate_bps),
    };
    PathReport {
        bdp: bdp::report(p),
        mathis: mathis::report(p.mss, p.rtt, c, given),
        responsiveness: responsiveness::report(p.rate_bps, p.rtt, p.mss),
    }
}

#[cfg(test)]
mod tests {
    use longhaul_units::Nanos;
    use longhaul_units::models::MATHIS_C_PER_ACK;

    use super::*;

    #[test]
    fn a_known_loss_gives_the_ceiling_otherwise_the_loss_needed() {
        let p = PathInputs {
            rate_bps: 10_000_000_000,
            rtt: Nanos::from_millis(120),
            mss: 1460,
            streams: 1,
        };
        let r = report(&p, MATHIS_C_PER_ACK, None);
        assert_eq!(r.bdp.bdp_bytes, 150_000_000);
        assert_eq!(r.mathis.mode, "loss_for_rate");
        assert_eq!(r.responsiveness.reno, "6164 s (1 h 43 min)");
        assert_eq!(
            report(&p, MATHIS_C_PER_ACK, Some(1e-8)).mathis.mode,
            "ceiling"
        );
    }
}
