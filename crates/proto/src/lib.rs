//! longhaul-proto (skeleton)
