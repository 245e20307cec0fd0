//! longhaul-link (being written)
