//! Fuzzes what a transfer receiver decides from a peer's manifest and from the journal it finds on
//! disk (issue 11): the tree rules, reserved names, `get`'s requested-names rule, the mode policy, and
//! the journal's derived temporaries.
//!
//! Invariants checked beyond "does not panic":
//! - an entry the manifest accepts has no reserved component, and for `get` lies under a requested
//!   name;
//! - the mode applied never has setuid, setgid or sticky unless the receiver asked, and never a
//!   permission bit the umask clears;
//! - every file a replayed journal knows has `temp == temp_path(path, identity)` (a reserved name in
//!   the file's own directory) and a path with no reserved component; a stripe's journal names a
//!   stripe that can exist;
//! - a stripe journal's name that parses is reserved and is the name of what it parsed to.

#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_proto::frame;
use longhaul_transfer::journal::Journal;
use longhaul_transfer::journal::temp_path;
use longhaul_transfer::manifest::{Manifest, ModePolicy, SPECIAL_BITS, check_requested};
use longhaul_transfer::msg::Message;
use longhaul_transfer::reserved::{is_reserved_name, reserved_component};
use longhaul_transfer::stripe::{journal_name, parse_journal_name};

fuzz_target!(|data: &[u8]| {
    // The first bytes choose the receiver's own settings; the rest is what the peer sends.
    let Some((&[umask_hi, umask_lo, flags], rest)) = data.split_first_chunk::<3>() else {
        return;
    };
    let policy = ModePolicy {
        umask: (u32::from(umask_hi) << 8 | u32::from(umask_lo)) & 0o777,
        keep_special_bits: flags & 1 != 0,
    };
    let requested: Vec<String> = ["a", "b/c", ".profile"]
        .iter()
        .take(usize::from(flags >> 1) % 4)
        .map(|s| s.rsplit('/').next().unwrap_or(s).to_string())
        .collect();

    let mut manifest = Manifest::new();
    let mut input = rest;
    while let Ok(Some((m, used))) = frame::decode(input, None) {
        input = &input[used..];
        let Message::ManifestBatch { entries, .. } = m else {
            continue;
        };
        for e in entries {
            let path = e.entry.path.clone();
            let mode = e.entry.mode;
            // `get` refuses the whole transfer on an entry not under a requested name.
            if !requested.is_empty() && check_requested(&path, &requested).is_err() {
                let top = path.components().next().unwrap_or_default();
                assert!(requested.iter().all(|n| n != top));
                return;
            }
            if manifest.add(e).is_ok() {
                assert!(reserved_component(&path).is_none(), "{path} accepted");
                let applied = policy.apply(mode);
                assert_eq!(applied & policy.umask, 0);
                if !policy.keep_special_bits {
                    assert_eq!(applied & SPECIAL_BITS, 0);
                }
            }
        }
    }

    let plain = Journal::replay(rest);
    let keyed = Journal::replay_keyed(rest, [0x5a; 32]);
    for (path, f) in plain.files().chain(keyed.files()) {
        assert_eq!(
            f.temp,
            temp_path(path, &f.identity),
            "temporary read from the journal"
        );
        assert!(is_reserved_name(f.temp.file_name()));
        assert_eq!(f.temp.parent(), path.parent());
        assert!(reserved_component(path).is_none());
    }
    for j in [&plain, &keyed] {
        if let Some(tag) = j.stripe() {
            assert!(tag.index < tag.count, "{tag:?}");
        }
        for d in j.dirs_created() {
            assert!(reserved_component(d).is_none(), "{d}");
        }
    }
    // A file name in the destination, as a receiver lists it.
    if let Some(name) = std::str::from_utf8(rest)
        .ok()
        .and_then(|t| t.lines().next())
        && let Some((run, index)) = parse_journal_name(name)
    {
        assert!(is_reserved_name(name), "{name}");
        assert_eq!(
            journal_name(&run, index).to_lowercase(),
            name.to_lowercase()
        );
    }
});
