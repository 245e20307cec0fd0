//! Host checks for a target path (`longhaul doctor`).
