//! longhaul-sys (skeleton)
