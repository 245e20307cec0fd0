//! longhaul-engine (skeleton)
