use super::*;

fn compiled(name: &str) -> CompiledPath {
    preset(name)
        .unwrap()
        .topology()
        .unwrap()
        .compile(&Overrides::default())
        .unwrap()
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs()
}

#[test]
fn every_preset_parses_compiles_and_describes() {
    for p in presets() {
        let t = p.topology().unwrap_or_else(|e| panic!("{}: {e}", p.name));
        assert_eq!(t.name, p.name);
        let c = t.compile(&Overrides::default()).unwrap();
        assert!(c.router_hops() >= 2, "{}", p.name);
        assert_eq!(c.forward.bottleneck.unwrap().rate_bps, 1_000_000_000);
        let text = describe(&c);
        assert!(text.contains(&c.hops[0].name), "{text}");
        println!("{text}");
    }
    assert!(preset("nowhere").is_none());
}

#[test]
fn ipv6_lsr_2004_matches_seed_001() {
    let c = compiled("ipv6-lsr-2004");
    assert_eq!(c.distance_km, 11_539.0);
    assert_eq!(c.lsr_distance_km(), 11_539.0);
    assert!(close(c.rtt.as_secs_f64(), 0.1928, 0.01), "{}", c.rtt);
    assert_eq!(c.rtt, Nanos(192_784_000));
    // Hop 2 (Chicago) answers at the seed's 127.237 ms.
    assert_eq!(c.hops[1].name, "Juniper T320 Chicago");
    assert_eq!(c.hops[1].cumulative_one_way, Nanos(63_618_500));
    assert_eq!(c.hops[1].addr_v4, Ipv4Addr::new(10, 201, 1, 2));
    assert_eq!(
        c.hops[1].addr_v6,
        "fd00:4c48:1::2".parse::<Ipv6Addr>().unwrap()
    );
    assert_eq!(c.router_hops(), 8);
}

#[test]
fn other_presets_match_their_seeds() {
    let c = compiled("cern-starlight");
    assert_eq!(c.distance_km, 7_067.0);
    assert_eq!(c.rtt, Nanos(127_237_000));
    assert_eq!(compiled("amsterdam-geneva").rtt, Nanos::from_millis(17));
    assert_eq!(compiled("sc2004-loop").rtt, Nanos::from_millis(466));
    let cc = compiled("cern-caltech-2004");
    assert_eq!(cc.rtt, Nanos::from_millis(264));
    assert_eq!(cc.router_hops(), 5);
    // Great circles Pasadena - Los Angeles - Chicago - Geneva: ~9,900 km.
    assert!(close(cc.distance_km, 9_900.0, 0.03), "{}", cc.distance_km);
    let t = compiled("tokyo-loop-30000km");
    assert!(close(t.distance_km, 32_372.0, 0.02), "{}", t.distance_km);
    assert_eq!(t.lsr_distance_km(), 30_000.0);
    // No measured RTT: fibre, 10 µs of RTT per km.
    assert!(close(t.rtt.as_secs_f64(), t.distance_km * 1e-5, 1e-6));
}

#[test]
fn overrides_apply() {
    let t = preset("ipv6-lsr-2004").unwrap().topology().unwrap();
    let o = Overrides {
        rtt: Some(Nanos::from_millis(100)),
        rate: Some(2_000_000_000),
        loss: Some(0.001),
        mtu: Some(9000),
        queue: None,
    };
    let c = t.compile(&o).unwrap();
    assert_eq!(c.rtt, Nanos::from_millis(100));
    assert_eq!(c.forward.delay, Nanos::from_millis(50));
    assert_eq!(c.hops.last().unwrap().cumulative_one_way.0, 49_909_744);
    let b = c.forward.bottleneck.unwrap();
    assert_eq!(b.rate_bps, 2_000_000_000);
    assert_eq!(c.reverse.bottleneck.unwrap().rate_bps, 2_000_000_000);
    // Queue auto = 1 BDP: 2 Gbit/s × 100 ms = 25 MB.
    assert_eq!(b.queue_bytes, 25_000_000);
    assert_eq!(c.forward.loss, Loss::Bernoulli { p: 0.001 });
    assert_eq!(c.reverse.loss, Loss::None);
    assert_eq!(c.mtu, 9000);
    assert_eq!(c.forward.mtu, 9000);
    // Hop delays scaled proportionally.
    let base = t.compile(&Overrides::default()).unwrap();
    for (a, b) in base.hops.iter().zip(&c.hops) {
        let ratio = b.cumulative_one_way.as_secs_f64() / a.cumulative_one_way.as_secs_f64();
        assert!(close(ratio, 100.0 / 192.784, 1e-6), "{ratio}");
    }
    // Default queue: 1 BDP at 1 Gbit/s × 192.784 ms.
    assert_eq!(base.forward.bottleneck.unwrap().queue_bytes, 24_098_000);
    let q = t
        .compile(&Overrides {
            queue: Some(1_000_000),
            ..Overrides::default()
        })
        .unwrap();
    assert_eq!(q.forward.bottleneck.unwrap().queue_bytes, 1_000_000);
    let bad = |o: Overrides| t.compile(&o).unwrap_err().field.unwrap();
    assert_eq!(
        bad(Overrides {
            rate: Some(0),
            ..Overrides::default()
        }),
        "--rate"
    );
    assert_eq!(
        bad(Overrides {
            mtu: Some(1400),
            ..Overrides::default()
        }),
        "--mtu"
    );
    assert_eq!(
        bad(Overrides {
            queue: Some(100),
            ..Overrides::default()
        }),
        "--queue"
    );
    assert_eq!(
        bad(Overrides {
            loss: Some(1.5),
            ..Overrides::default()
        }),
        "--loss"
    );
}

const GOOD: &str = r#"name = "test"
rate = "1G"

[sender]
city = "Geneva"
lat = 46.2044
lon = 6.1432

[[hop]]
name = "r1"
km = 10

[[hop]]
name = "r2"
city = "Chicago"
lat = 41.8781
lon = -87.6298

[[hop]]
name = "r3"
delay = "1ms"

[receiver]
km = 250
"#;

fn err(text: &str) -> TopologyError {
    Topology::from_toml(text, "paths/x.toml").unwrap_err()
}

#[test]
fn a_small_file_compiles_with_derived_distances() {
    let t = Topology::from_toml(GOOD, "paths/x.toml").unwrap();
    let c = t.compile(&Overrides::default()).unwrap();
    assert_eq!(c.hops[0].km, 10.0);
    assert_eq!(c.hops[0].one_way, Nanos::from_micros(50));
    // r1 has no coordinates, so r2's distance is unknown: 0 km.
    assert_eq!(c.hops[1].km, 0.0);
    assert_eq!(c.hops[2].one_way, Nanos::from_millis(1));
    assert_eq!(c.receiver_one_way, Nanos::from_micros(1_250));
    assert_eq!(c.forward.delay, Nanos::from_micros(2_300));
    // Great circle when both ends have coordinates.
    let two = GOOD.replace(
        "name = \"r1\"\nkm = 10",
        "name = \"r1\"\nlat = 46.2044\nlon = 6.1432",
    );
    let c = Topology::from_toml(&two, "x")
        .unwrap()
        .compile(&Overrides::default())
        .unwrap();
    assert!(close(c.hops[1].km, 7_067.0, 0.01), "{}", c.hops[1].km);
}

#[test]
fn syntax_error_names_file_line_column() {
    let e = err("name = \"x\"\nrate = \"1G\"\n[[hop]]\nname = \n");
    assert_eq!(e.file, "paths/x.toml");
    assert_eq!(e.line, Some(4));
    assert!(e.column.is_some());
    assert!(e.to_string().starts_with("paths/x.toml:4:"), "{e}");
}

#[test]
fn unknown_field_names_line_and_field() {
    let e = err(&GOOD.replace("name = \"r3\"", "name = \"r3\"\nkmz = 4"));
    assert_eq!(e.line, Some(21), "{e}");
    assert_eq!(e.field.as_deref(), Some("hop[2].kmz"), "{e}");
    assert!(e.message.contains("unknown field"), "{e}");
}

#[test]
fn negative_km_names_line_and_field() {
    let e = err(&GOOD.replace("km = 10", "km = -5"));
    assert_eq!(e.field.as_deref(), Some("hop[0].km"));
    assert_eq!(e.line, Some(11));
    assert!(
        e.to_string()
            .starts_with("paths/x.toml:11: hop[0].km: distance"),
        "{e}"
    );
    assert!(e.to_string().contains("-5"), "{e}");
}

#[test]
fn impossible_values_are_refused_with_their_line() {
    for (from, to, field, line) in [
        ("rate = \"1G\"", "rate = \"0\"", "rate", 2),
        (
            "rate = \"1G\"",
            "rate = \"1G\"\nqueue = \"1000\"",
            "queue",
            3,
        ),
        ("rate = \"1G\"", "rate = \"1G\"\nmtu = 1400", "mtu", 3),
        ("rate = \"1G\"", "rate = \"1G\"\nloss = 1.5", "loss", 3),
        (
            "rate = \"1G\"",
            "rate = \"1G\"\nloss = { model = \"gilbert_elliott\", p = 0.1, r = 2.0 }",
            "loss.r",
            3,
        ),
        ("km = 10", "km = 10\ndelay = \"1ms\"", "hop[0].km", 11),
        ("delay = \"1ms\"", "delay = \"-1ms\"", "hop[2].delay", 21),
        ("lat = 46.2044", "lat = 146.2044", "sender.lat", 6),
        (
            "[receiver]\nkm = 250",
            "[receiver]\nrtt = \"1ms\"",
            "receiver.rtt",
            24,
        ),
    ] {
        let text = GOOD.replace(from, to);
        assert_ne!(text, GOOD);
        let e = err(&text);
        assert_eq!(e.field.as_deref(), Some(field), "{e}");
        assert_eq!(e.line, Some(line), "{e}");
        assert!(e.to_string().starts_with("paths/x.toml:"), "{e}");
    }
}

#[test]
fn an_empty_path_is_refused() {
    let e = err("name = \"x\"\nrate = \"1G\"\n");
    assert_eq!(e.field.as_deref(), Some("hop"));
    assert!(e.message.contains("at least one"), "{e}");
    assert_eq!(e.file, "paths/x.toml");
}

#[test]
fn round_trip_through_toml() {
    for p in presets() {
        let t = p.topology().unwrap();
        let text = t.to_toml();
        let back = Topology::from_toml(&text, "rt").unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back, t);
    }
    let mut t = Topology::from_toml(GOOD, "x").unwrap();
    t.loss = Some(LossSpec::Model(Loss::GilbertElliott {
        p: 0.01,
        r: 0.3,
        one_minus_h: 1.0,
        one_minus_k: 0.0,
    }));
    t.reverse_loss = Some(LossSpec::Probability(0.001));
    let back = Topology::from_toml(&t.to_toml(), "rt").unwrap();
    assert_eq!(back, t);
}

#[test]
fn truncated_files_never_panic() {
    for p in presets() {
        for (i, _) in p.toml.char_indices() {
            if let Ok(t) = Topology::from_toml(&p.toml[..i], "cut.toml") {
                let _ = t.compile(&Overrides::default()).map(|c| describe(&c));
            }
        }
    }
}
