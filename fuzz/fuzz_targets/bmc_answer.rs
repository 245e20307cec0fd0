//! Arbitrary bytes as a BMC's answers: a Redfish systems collection, a system (its PowerState and
//! reset action), ipmitool's status output, and as a BMC file. Parsing must return errors, never
//! panic; a reset it accepts must target a path under /redfish/v1/ with a ResetType it chose.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_power::redfish::{power_state, reset_for, the_system};
use longhaul_power::{BmcFile, Request, ipmi, quote};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = ipmi::parse_status(&text);
    let _ = quote(&text, 40);
    let _ = BmcFile::parse(&text, "fuzz.toml");
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    if let Ok(path) = the_system(&v) {
        assert!(path.starts_with("/redfish/v1/") && !path.contains(".."), "{path}");
    }
    let _ = power_state(&v);
    for r in [Request::On, Request::Off, Request::Reset] {
        if let Ok((target, reset_type)) = reset_for(&v, "/redfish/v1/Systems/1", r) {
            assert!(target.starts_with("/redfish/v1/") && !target.contains("://"), "{target}");
            assert!(["On", "ForceOn", "ForceOff", "ForceRestart"].contains(&reset_type));
        }
    }
});
