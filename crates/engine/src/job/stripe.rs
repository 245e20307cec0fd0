//! Striped copies: `longhaul copy --stripe A2=B2 ... A1:SRC B1:DEST`. One dataset moves over
//! several pairs of servers at once, the senders sharing the source storage and the receivers the
//! destination (`longhaul_transfer::stripe`).
//!
//! The controller names a run (16 random bytes) and runs one third-party copy per pair
//! ([`run_remote_copy`]), all at once, each told its stripe: its index, the number of pairs and the
//! run's chunk size. Each B's ticket admits only its stripe; each A sends only that stripe's chunks.
//! The receiving stripe that ends last puts every file in place and says so in its summary. A pair
//! that fails does not stop the others; the copy is then incomplete, and the same command (with the
//! same or other pairs) resumes: every journal in the destination counts, whatever striped it.

use std::sync::Mutex;

use longhaul_transfer::report::Event;
use longhaul_transfer::stripe::{MAX_STRIPES, RunId, Stripe};

use super::copy::{CopyResult, RemoteCopy, run_remote_copy};
use crate::{EngineError, random};

/// The run's chunk size when none is given: a chunk size needs no round-trip time here (each pair
/// would choose its own), and 8 MiB suits paths from a LAN to 10 Gbit/s × 100 ms.
pub const STRIPE_CHUNK: u64 = 8 << 20;

/// One pair of a striped copy: a sending and a receiving server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripePair {
    /// The sending server ("A") and its port.
    pub from: String,
    /// A's port.
    pub from_port: u16,
    /// The receiving server ("B").
    pub to: String,
    /// B's port.
    pub to_port: u16,
}

/// How a striped copy ended: the run, and each pair's copy (or why it could not start).
#[derive(Debug)]
pub struct StripedResult {
    /// The run's name (32 hex digits).
    pub run: String,
    /// The run's chunk size.
    pub chunk_size: u64,
    /// Per pair, in order: the pair and how its copy ended.
    pub pairs: Vec<(StripePair, Result<CopyResult, String>)>,
}

impl StripedResult {
    /// Whether every file is in place: every pair ended cleanly and one receiver put the files
    /// in place with none failing.
    pub fn complete(&self) -> bool {
        let clean = |r: &Result<CopyResult, String>| {
            r.as_ref().is_ok_and(|c| {
                [&c.sender, &c.receiver]
                    .iter()
                    .all(|s| s.as_ref().is_ok_and(|s| s.failed.is_empty()))
            })
        };
        self.pairs.iter().all(|(_, r)| clean(r))
            && self.pairs.iter().any(|(_, r)| {
                r.as_ref().is_ok_and(|c| {
                    c.receiver
                        .as_ref()
                        .is_ok_and(|s| s.stripe.as_ref().is_some_and(|s| s.finished))
                })
            })
    }
}

/// Runs `base`'s copy striped over `pairs` (`base`'s own from/to are ignored; its paths, dest and
/// flags apply to every pair). `on_event(k, e)` sees pair `k`'s sender's events as they come.
pub fn run_striped_copy(
    base: &RemoteCopy,
    pairs: &[StripePair],
    on_event: &(dyn Fn(usize, &Event) + Sync),
) -> Result<StripedResult, EngineError> {
    if pairs.is_empty() || pairs.len() > MAX_STRIPES as usize {
        return Err(EngineError::Transfer(format!(
            "a striped copy runs over 1 to {MAX_STRIPES} pairs, not {}",
            pairs.len()
        )));
    }
    let mut run = RunId([0; 16]);
    random::fill(&mut run.0, "a striped run's name")?;
    let chunk_size = base.chunk_size.unwrap_or(STRIPE_CHUNK);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for (k, pair) in pairs.iter().enumerate() {
            let results = &results;
            let cfg = RemoteCopy {
                from: pair.from.clone(),
                from_port: pair.from_port,
                to: pair.to.clone(),
                to_port: pair.to_port,
                chunk_size: Some(chunk_size),
                stripe: Some(Stripe {
                    run,
                    index: k as u32,
                    count: pairs.len() as u32,
                    chunk_size,
                }),
                ..base.clone()
            };
            scope.spawn(move || {
                let r = run_remote_copy(&cfg, &mut |e| on_event(k, e)).map_err(|e| e.to_string());
                results
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((k, r));
            });
        }
    });
    let mut done = results.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_by_key(|(k, _)| *k);
    Ok(StripedResult {
        run: run.to_string(),
        chunk_size,
        pairs: pairs
            .iter()
            .cloned()
            .zip(done.into_iter().map(|(_, r)| r))
            .collect(),
    })
}
