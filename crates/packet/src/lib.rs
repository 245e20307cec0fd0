//! longhaul-packet (being written)
