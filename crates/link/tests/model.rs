//! Behaviour of the link model under virtual time: exact delay, rate and
//! queue; loss, reordering and duplication statistics for fixed seeds;
//! CoDel; and the key property that a record of N segments gets exactly the
//! fates of N one-segment records.

use longhaul_link::sim::{self, Aimd, Offer};
use longhaul_link::{
    Aqm, Bottleneck, CrossTraffic, DropCause, Fate, Jitter, Link, LinkConfig, Loss, Nanos, OnOff,
    Record, Reorder, SegmentFate, What,
};
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

const GBIT: u64 = 1_000_000_000;

fn bottleneck(rate_bps: u64, queue_bytes: u64) -> Bottleneck {
    Bottleneck {
        rate_bps,
        queue_bytes,
        overhead_per_frame: 0,
        aqm: Aqm::DropTail,
    }
}

fn full(id: u64) -> Record {
    Record::single(id, 52, 1448)
}

fn within_3_sigma(count: u64, n: u64, p: f64) -> bool {
    let mean = n as f64 * p;
    let sigma = (n as f64 * p * (1.0 - p)).sqrt();
    (count as f64 - mean).abs() <= 3.0 * sigma
}

#[test]
fn lone_segment_is_released_after_serialization_and_delay() {
    let mut link = Link::new(LinkConfig {
        bottleneck: Some(bottleneck(GBIT, 100_000)),
        delay: Nanos::from_millis(30),
        ..LinkConfig::default()
    })
    .unwrap();
    let now = Nanos::from_secs(5);
    let t = sim::run(
        &mut link,
        [Offer {
            at: now,
            record: full(0),
        }],
    )
    .unwrap();
    // 1500 B at 1 Gbit/s = 12 µs.
    assert_eq!(
        t.delivered[0].at,
        now + Nanos(12_000) + Nanos::from_millis(30)
    );
}

#[test]
fn back_to_back_segments_leave_exactly_one_serialization_apart() {
    let mut link = Link::new(LinkConfig {
        bottleneck: Some(Bottleneck {
            overhead_per_frame: 38,
            ..bottleneck(GBIT, 10_000_000)
        }),
        delay: Nanos::from_millis(1),
        ..LinkConfig::default()
    })
    .unwrap();
    let t = sim::run(&mut link, sim::burst(Nanos::ZERO, 1000, full(0))).unwrap();
    assert_eq!(t.dropped.len(), 0);
    for (k, d) in t.delivered.iter().enumerate() {
        // 1538 B on the wire = 12,304 ns each.
        assert_eq!(d.at, Nanos(12_304 * (k as u64 + 1)) + Nanos::from_millis(1));
    }
}

#[test]
fn long_run_rate_is_exact() {
    // 3 Gbit/s does not divide the frame time: 1538 B = 4101.33 ns.
    let rate = 3 * GBIT;
    let mut link = Link::new(LinkConfig {
        bottleneck: Some(Bottleneck {
            overhead_per_frame: 38,
            ..bottleneck(rate, 2_000_000)
        }),
        ..LinkConfig::default()
    })
    .unwrap();
    // Offered at 3 Gbit/s of IP bytes, i.e. above 3 Gbit/s of wire bytes:
    // always backlogged (the queue drops some), so departures are back to back.
    let offers = sim::paced(Nanos::ZERO, rate, 200_000, full(0));
    let t = sim::run(&mut link, offers).unwrap();
    let first = t.delivered.first().unwrap().at;
    let last = t.delivered.last().unwrap().at;
    let wire_bits = (t.delivered.len() as u64 - 1) * 1538 * 8;
    let measured = wire_bits as f64 / (last - first).as_secs_f64();
    assert!(
        ((measured - rate as f64) / rate as f64).abs() < 1e-9,
        "{measured}"
    );
}

#[test]
fn burst_larger_than_the_queue_drops_exactly_what_does_not_fit() {
    // 10 full frames fit in 15,000 B; the 11th does not.
    let mut link = Link::new(LinkConfig {
        bottleneck: Some(bottleneck(GBIT, 15_000)),
        ..LinkConfig::default()
    })
    .unwrap();
    let t = sim::run(&mut link, sim::burst(Nanos(1), 25, full(0))).unwrap();
    let kept: Vec<u64> = t.delivered.iter().map(|d| d.record).collect();
    assert_eq!(kept, (0..10).collect::<Vec<_>>());
    assert!(t.dropped.iter().all(|d| d.cause == DropCause::Queue));
    assert_eq!(t.dropped.len(), 15);
    // One byte less and only 9 fit; a short segment still fits the gap.
    let mut link = Link::new(LinkConfig {
        bottleneck: Some(bottleneck(GBIT, 14_999)),
        ..LinkConfig::default()
    })
    .unwrap();
    let mut offers = sim::burst(Nanos(1), 10, full(0));
    offers.push(Offer {
        at: Nanos(1),
        record: Record::single(99, 52, 1447),
    });
    let t = sim::run(&mut link, offers).unwrap();
    assert_eq!(t.delivered.len(), 10);
    assert_eq!(t.delivered.last().unwrap().record, 99);
    assert_eq!(link.stats().queue_max_bytes, 14_999);
}

#[test]
fn backlog_never_exceeds_the_queue() {
    let cfg = LinkConfig {
        seed: 3,
        bottleneck: Some(bottleneck(GBIT, 50_000)),
        cross: Some(CrossTraffic {
            cbr_bps: 300_000_000,
            on_off: Some(OnOff {
                rate_bps: 900_000_000,
                on: Nanos::from_micros(300),
                off: Nanos::from_micros(500),
                exponential: true,
            }),
        }),
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let mut now = Nanos::ZERO;
    let mut out = Vec::new();
    for id in 0..50_000 {
        now += Nanos(rng.next_u64() % 20_000);
        let segments = 1 + (rng.next_u64() % 8) as u32;
        let rec = Record {
            id,
            flow: 0,
            segments,
            header_bytes: 52,
            payload: segments * 1448,
            mss: 1448,
        };
        link.arrive(now, &rec, &mut out).unwrap();
        assert!(link.backlog_bytes(now) <= 50_000);
    }
    let s = link.stats();
    assert!(s.queue_max_bytes <= 50_000);
    assert!(s.drop_queue > 0 && s.cross_dropped_bytes > 0, "{s:?}");
}

#[test]
fn bernoulli_loss_is_within_three_sigma() {
    let mut link = Link::new(LinkConfig {
        seed: 42,
        loss: Loss::Bernoulli { p: 0.01 },
        ..LinkConfig::default()
    })
    .unwrap();
    let n = 1_000_000;
    let mut out = Vec::new();
    for id in 0..n {
        out.clear();
        link.arrive_each(Nanos(id), &full(id), &mut out).unwrap();
    }
    let s = link.stats();
    assert!(within_3_sigma(s.drop_random, n, 0.01), "{}", s.drop_random);
    assert_eq!(s.drop_random + s.delivered, n);
}

#[test]
fn gilbert_elliott_matches_the_analytic_rates() {
    let (p, r) = (0.01, 0.25);
    let mut link = Link::new(LinkConfig {
        seed: 7,
        loss: Loss::GilbertElliott {
            p,
            r,
            one_minus_h: 1.0,
            one_minus_k: 0.0,
        },
        ..LinkConfig::default()
    })
    .unwrap();
    let n = 1_000_000u64;
    let rec = Record {
        id: 0,
        flow: 0,
        segments: 1000,
        header_bytes: 52,
        payload: 1_448_000,
        mss: 1448,
    };
    let mut lost = Vec::with_capacity(n as usize);
    let mut out = Vec::new();
    for k in 0..n / 1000 {
        out.clear();
        link.arrive_each(Nanos(k), &rec, &mut out).unwrap();
        lost.extend(out.iter().map(|s| matches!(s.what, What::Drop { .. })));
    }
    let rate = lost.iter().filter(|&&l| l).count() as f64 / n as f64;
    let pi_b = p / (p + r);
    assert!((rate - pi_b).abs() < 0.1 * pi_b, "loss {rate} vs {pi_b}");
    let bursts = lost.windows(2).filter(|w| w[1] && !w[0]).count() + usize::from(lost[0]);
    let mean_burst = rate * n as f64 / bursts as f64;
    assert!((mean_burst - 1.0 / r).abs() < 0.1 / r, "burst {mean_burst}");
    assert_eq!(link.stats().drop_burst, (rate * n as f64).round() as u64);
}

/// A random configuration exercising every stage.
fn random_config(rng: &mut ChaCha8Rng) -> LinkConfig {
    let mut pick = |n: u64| rng.next_u64() % n;
    let rate = [10_000_000, 100_000_000, GBIT, 3 * GBIT][pick(4) as usize];
    let aqm = if pick(2) == 0 {
        Aqm::DropTail
    } else {
        Aqm::Codel {
            target: Nanos::from_micros(50 + pick(500)),
            interval: Nanos::from_millis(1 + pick(5)),
        }
    };
    LinkConfig {
        seed: pick(1 << 40),
        loss: match pick(3) {
            0 => Loss::None,
            1 => Loss::Bernoulli { p: 0.05 },
            _ => Loss::GilbertElliott {
                p: 0.02,
                r: 0.3,
                one_minus_h: 0.8,
                one_minus_k: 0.01,
            },
        },
        cross: (pick(2) == 0).then(|| CrossTraffic {
            cbr_bps: rate / 4,
            on_off: Some(OnOff {
                rate_bps: rate,
                on: Nanos::from_micros(1 + pick(400)),
                off: Nanos::from_micros(1 + pick(400)),
                exponential: pick(2) == 0,
            }),
        }),
        bottleneck: (pick(5) != 0).then(|| Bottleneck {
            rate_bps: rate,
            queue_bytes: 1538 + pick(200_000),
            overhead_per_frame: [0, 38][pick(2) as usize],
            aqm,
        }),
        delay: Nanos(pick(50_000_000)),
        km: (pick(2) == 0).then_some(pick(5000) as f64),
        jitter: match pick(3) {
            0 => Jitter::None,
            1 => Jitter::Uniform {
                max: Nanos(pick(100_000)),
            },
            _ => Jitter::Normal {
                mean: Nanos(pick(50_000)),
                sigma: Nanos(pick(50_000)),
            },
        },
        jitter_reorders: pick(2) == 0,
        reorder: (pick(2) == 0).then(|| Reorder {
            probability: 0.05,
            hold: Nanos(1 + pick(1_000_000)),
        }),
        duplicate: [0.0, 0.02][pick(2) as usize],
        corrupt: [0.0, 0.03][pick(2) as usize],
        mtu: 1500,
    }
    .fix_cross()
}

trait FixCross {
    fn fix_cross(self) -> Self;
}

impl FixCross for LinkConfig {
    /// Cross traffic needs a bottleneck.
    fn fix_cross(mut self) -> Self {
        if self.bottleneck.is_none() {
            self.cross = None;
        }
        self
    }
}

#[test]
fn records_get_exactly_the_fates_of_their_segments() {
    let mut rng = ChaCha8Rng::seed_from_u64(2024);
    for case in 0..300 {
        let cfg = random_config(&mut rng);
        let mut whole = Link::new(cfg.clone()).unwrap();
        let mut split = Link::new(cfg.clone()).unwrap();
        let mut now = Nanos::ZERO;
        for id in 0..200 {
            now += Nanos(rng.next_u64() % 200_000);
            let segments = 1 + (rng.next_u64() % 45) as u32;
            let mss = [536, 1448, 8948][(rng.next_u64() % 3) as usize];
            let payload = (segments - 1) * mss + 1 + (rng.next_u64() % u64::from(mss)) as u32;
            let rec = Record {
                id,
                flow: rng.next_u64(),
                segments,
                header_bytes: 52,
                payload,
                mss,
            };
            let mut got = Vec::new();
            whole.arrive_each(now, &rec, &mut got).unwrap();
            let mut want = Vec::new();
            let mut one = Vec::new();
            for i in 0..segments {
                one.clear();
                split.arrive_each(now, &rec.segment(i), &mut one).unwrap();
                want.extend(one.iter().map(|s| SegmentFate { index: i, ..*s }));
            }
            assert_eq!(got, want, "case {case} record {id}: {cfg:?}");
            // The runs cover the same fates.
            let mut runs = Vec::new();
            longhaul_link::coalesce(&got, whole.run_gap(), &mut runs);
            assert_eq!(expand(&runs, &got), covered(&got), "case {case}");
        }
        let (a, b) = (whole.stats(), split.stats());
        assert_eq!(
            (
                a.delivered,
                a.drop_queue,
                a.drop_aqm,
                a.drop_random,
                a.drop_burst
            ),
            (
                b.delivered,
                b.drop_queue,
                b.drop_aqm,
                b.drop_random,
                b.drop_burst
            )
        );
        assert_eq!((a.duplicates, a.reordered), (b.duplicates, b.reordered));
    }
}

/// (index, is-dup, drop cause or release range check) for each run member.
fn expand(runs: &[Fate], segs: &[SegmentFate]) -> Vec<(u32, u8)> {
    let mut v = Vec::new();
    for r in runs {
        for i in r.first..r.first + r.count {
            let kind = match r.what {
                What::Deliver { from, at } | What::Duplicate { from, at } => {
                    let dup = matches!(r.what, What::Duplicate { .. });
                    let seg = segs
                        .iter()
                        .find(|s| s.index == i && matches!(s.what, What::Duplicate { .. }) == dup)
                        .unwrap();
                    let (What::Deliver { at: t, .. } | What::Duplicate { at: t, .. }) = seg.what
                    else {
                        unreachable!()
                    };
                    assert!(from <= t && t <= at);
                    u8::from(dup)
                }
                What::Corrupt { from, at } => {
                    assert_eq!(r.count, 1, "a damaged segment is a run of its own");
                    let seg = segs.iter().find(|s| s.index == i).unwrap();
                    assert_eq!(seg.what, What::Corrupt { from, at });
                    10
                }
                What::Drop { cause } => 2 + cause as u8,
            };
            v.push((i, kind));
        }
    }
    v.sort_unstable();
    v
}

fn covered(segs: &[SegmentFate]) -> Vec<(u32, u8)> {
    let mut v: Vec<(u32, u8)> = segs
        .iter()
        .map(|s| {
            let k = match s.what {
                What::Deliver { .. } => 0,
                What::Duplicate { .. } => 1,
                What::Corrupt { .. } => 10,
                What::Drop { cause } => 2 + cause as u8,
            };
            (s.index, k)
        })
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn a_delivered_record_is_one_run_on_a_plain_path() {
    let mut link = Link::new(LinkConfig {
        bottleneck: Some(bottleneck(GBIT, 10_000_000)),
        delay: Nanos::from_millis(60),
        ..LinkConfig::default()
    })
    .unwrap();
    let rec = Record {
        id: 1,
        flow: 0,
        segments: 44,
        header_bytes: 52,
        payload: 44 * 1448 - 100,
        mss: 1448,
    };
    let mut out = Vec::new();
    link.arrive(Nanos(0), &rec, &mut out).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].count, 44);
}

fn releases(cfg: LinkConfig, n: u64) -> (Vec<Nanos>, Link) {
    let mut link = Link::new(cfg).unwrap();
    let t = sim::run(&mut link, sim::paced(Nanos::ZERO, GBIT, n, full(0))).unwrap();
    // In decision (= send) order.
    let mut v: Vec<(u64, Nanos)> = t.delivered.iter().map(|d| (d.record, d.at)).collect();
    v.sort_unstable();
    (v.into_iter().map(|(_, t)| t).collect(), link)
}

#[test]
fn jitter_keeps_fifo_unless_asked_to_reorder() {
    let cfg = LinkConfig {
        seed: 11,
        bottleneck: Some(bottleneck(2 * GBIT, 1_000_000)),
        delay: Nanos::from_millis(10),
        jitter: Jitter::Uniform {
            max: Nanos::from_micros(100),
        },
        ..LinkConfig::default()
    };
    let (r, _) = releases(cfg.clone(), 20_000);
    assert!(r.windows(2).all(|w| w[0] <= w[1]));
    let (r, _) = releases(
        LinkConfig {
            jitter_reorders: true,
            ..cfg
        },
        20_000,
    );
    assert!(r.windows(2).filter(|w| w[0] > w[1]).count() > 1000);
}

#[test]
fn reordering_displaces_the_configured_fraction() {
    let p = 0.02;
    let hold = Nanos::from_micros(50); // about 4 segment times at 1 Gbit/s
    let (r, link) = releases(
        LinkConfig {
            seed: 5,
            bottleneck: Some(bottleneck(GBIT, 1_000_000)),
            delay: Nanos::from_millis(10),
            reorder: Some(Reorder {
                probability: p,
                hold,
            }),
            ..LinkConfig::default()
        },
        100_000,
    );
    let s = link.stats();
    assert!(within_3_sigma(s.reordered, 100_000, p), "{}", s.reordered);
    // Each displaced segment is overtaken: it arrives later than the next
    // one, and exactly `hold` after its in-order time (12 µs spacing).
    let late = r.windows(2).filter(|w| w[0] > w[1]).count() as u64;
    assert!(
        late >= s.reordered * 9 / 10 && late <= s.reordered,
        "{late}"
    );
}

#[test]
fn duplication_is_within_three_sigma() {
    let mut link = Link::new(LinkConfig {
        seed: 8,
        duplicate: 0.05,
        ..LinkConfig::default()
    })
    .unwrap();
    let n = 200_000;
    let t = sim::run(&mut link, sim::paced(Nanos::ZERO, GBIT, n, full(0))).unwrap();
    let dups = t.delivered.iter().filter(|d| d.duplicate).count() as u64;
    assert_eq!(dups, link.stats().duplicates);
    assert!(within_3_sigma(dups, n, 0.05), "{dups}");
}

#[test]
fn corruption_is_within_three_sigma_and_keeps_the_segment_on_time() {
    let cfg = |corrupt| LinkConfig {
        seed: 9,
        corrupt,
        bottleneck: Some(bottleneck(GBIT, 1 << 20)),
        delay: Nanos::from_millis(10),
        ..LinkConfig::default()
    };
    let n = 200_000;
    let mut clean = Link::new(cfg(0.0)).unwrap();
    let mut noisy = Link::new(cfg(0.01)).unwrap();
    let a = sim::run(&mut clean, sim::paced(Nanos::ZERO, GBIT, n, full(0))).unwrap();
    let b = sim::run(&mut noisy, sim::paced(Nanos::ZERO, GBIT, n, full(0))).unwrap();
    let bad = b.delivered.iter().filter(|d| d.corrupt).count() as u64;
    assert_eq!(bad, noisy.stats().corrupted);
    assert!(within_3_sigma(bad, n, 0.01), "{bad}");
    // A damaged segment is still carried: same releases, nothing dropped.
    let times = |t: &sim::Trace| t.delivered.iter().map(|d| d.at).collect::<Vec<_>>();
    assert_eq!(times(&a), times(&b));
    assert_eq!(noisy.stats().delivered, n);
}

#[test]
fn codel_drops_a_standing_queue_down_toward_target() {
    let cfg = |aqm| LinkConfig {
        seed: 1,
        bottleneck: Some(Bottleneck {
            aqm,
            ..bottleneck(100_000_000, 2_000_000) // 4 BDP of 40 ms at 100 Mbit/s
        }),
        delay: Nanos::from_millis(20),
        ..LinkConfig::default()
    };
    let flow = Aimd {
        segment_bytes: 1500,
        header_bytes: 52,
        return_delay: Nanos::from_millis(20),
        base_rtt: Nanos::from_millis(40),
    };
    // Queueing delay of each delivered segment: release − send − D − 120 µs.
    let queue_delay = |aqm| {
        let mut link = Link::new(cfg(aqm)).unwrap();
        let t = flow.run(&mut link, Nanos::from_secs(30)).unwrap();
        let late: Vec<f64> = t
            .samples
            .iter()
            .filter(|s| s.sent >= Nanos::from_secs(10))
            .map(|s| (s.released - s.sent - Nanos::from_millis(20) - Nanos(120_000)).as_secs_f64())
            .collect();
        let mean = late.iter().sum::<f64>() / late.len() as f64;
        (mean, link.stats(), late.len())
    };
    let (tail, tail_stats, _) = queue_delay(Aqm::DropTail);
    let (codel, codel_stats, delivered) = queue_delay(Aqm::codel());
    assert_eq!(tail_stats.drop_aqm, 0);
    assert!(codel_stats.drop_aqm > 0);
    assert!(tail > 0.05, "drop-tail standing queue {tail} s");
    assert!(codel < 0.015, "CoDel queue delay {codel} s");
    // And the link stays busy: ≥ 80 % of 20 s at 100 Mbit/s.
    assert!(
        delivered as f64 * 1500.0 * 8.0 >= 0.8 * 20.0 * 1e8,
        "{delivered}"
    );
}
