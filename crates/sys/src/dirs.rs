//! Where longhaul keeps a user's data: the one lookup of the XDG data directory, used by the lab
//! archive (`longhaul lab`) and the testbed service's default database (`longhaul testbed serve`).
//!
//! The XDG Base Directory Specification (freedesktop.org) puts user data in `$XDG_DATA_HOME`, and in
//! `$HOME/.local/share` when that variable is unset or empty.

use std::ffi::OsString;
use std::path::PathBuf;

/// `$XDG_DATA_HOME/longhaul`, else `$HOME/.local/share/longhaul`; `None` when neither variable is
/// set (the caller decides: the lab archive falls back to `./longhaul`, the testbed service asks for
/// `--database`). Creates nothing.
pub fn data_dir() -> Option<PathBuf> {
    data_dir_from(std::env::var_os("XDG_DATA_HOME"), std::env::var_os("HOME"))
}

/// [`data_dir`] from the two variables' values.
fn data_dir_from(xdg_data_home: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let base = match xdg_data_home.filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(home?).join(".local/share"),
    };
    Some(base.join("longhaul"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdg_data_home_wins_and_an_empty_one_counts_as_unset() {
        let dir = |x: Option<&str>, h: Option<&str>| {
            data_dir_from(x.map(OsString::from), h.map(OsString::from))
        };
        assert_eq!(
            dir(Some("/d"), Some("/h")),
            Some(PathBuf::from("/d/longhaul"))
        );
        assert_eq!(
            dir(Some(""), Some("/h")),
            Some(PathBuf::from("/h/.local/share/longhaul"))
        );
        assert_eq!(
            dir(None, Some("/h")),
            Some(PathBuf::from("/h/.local/share/longhaul"))
        );
        assert_eq!(dir(None, None), None);
        assert_eq!(dir(Some(""), None), None);
    }
}
