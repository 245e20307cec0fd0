//! Stamps the binary with what `longhaul --version` prints besides the crate's version: the commit
//! it was built from (`git rev-parse`, `+dirty` when tracked files differ from it; a package build
//! without `.git` gives it in LONGHAUL_COMMIT) and the target it was built for.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=LONGHAUL_COMMIT");
    for f in [".git/HEAD", ".git/index", ".git/refs", ".git/packed-refs"] {
        if std::path::Path::new(f).exists() {
            println!("cargo:rerun-if-changed={f}");
        }
    }
    let commit = std::env::var("LONGHAUL_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| {
            let head = git(&["rev-parse", "--short=12", "HEAD"])?;
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            Some(if dirty { format!("{head}+dirty") } else { head })
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=LONGHAUL_COMMIT={commit}");
    println!(
        "cargo:rustc-env=LONGHAUL_TARGET={}",
        std::env::var("TARGET").unwrap_or_default()
    );
}
