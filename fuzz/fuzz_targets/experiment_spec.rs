//! Arbitrary UTF-8 as an experiment file: parsing must return an error or a
//! spec, never panic; a spec must expand into points whose arguments, reduced
//! variant and (for presets) compiled paths and predictions are computed
//! without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_experiments::Spec;
use longhaul_experiments::predict::predict;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(spec) = Spec::parse(text, "fuzz.toml")
    {
        let topology = spec.topology(None).ok();
        for spec in [spec.reduced(), spec] {
            let _ = spec.test_time();
            for point in spec.points() {
                let _ = point.test_args();
                let _ = point.emulate_args();
                if let Some(topology) = &topology
                    && let Ok(path) = point.compile(topology)
                {
                    let _ = predict(&point, &path);
                    let _ = point.event_plan(path.forward.bottleneck.map_or(0, |b| b.rate_bps));
                }
            }
        }
    }
});
