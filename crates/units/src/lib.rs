//! longhaul-units (skeleton)
