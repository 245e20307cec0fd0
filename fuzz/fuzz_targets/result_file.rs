//! Arbitrary bytes as a `longhaul lab` result file (what `lab show/report/plot/records --check`
//! read from an archive): reading must return an error or a result, never panic; a result that
//! validates must survive what the CLI does with it (the LSR candidate and the rule check) and
//! round-trip through its own JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_experiments::records::check;
use longhaul_experiments::result::ResultFile;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(result) = ResultFile::from_json(text)
    {
        if let Some(candidate) = result.lsr_candidate() {
            let _ = check(&candidate);
        }
        let again = ResultFile::from_json(&result.to_json()).expect("a result re-reads itself");
        assert_eq!(again.run_id, result.run_id);
    }
});
