//! Disk-to-disk transfers (`longhaul send` / `longhaul get`): the I/O around the sans-IO core in
//! `longhaul-transfer`. This slice: [`root`], the directory a transfer is confined to.

pub mod root;
