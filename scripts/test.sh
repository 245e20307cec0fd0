#!/usr/bin/env bash
# The README's test command: installs what the tests need (idempotently), then runs them.
#
#   scripts/test.sh                   install what is missing, then `cargo test --workspace`
#   scripts/test.sh ARGS...           install, then `cargo test ARGS...` (e.g. `-p longhaul-sys netns::`)
#   scripts/test.sh --install         install only (.ci/run does this before fmt and clippy)
#
# Installs the Debian packages of scripts/test-packages.txt that are missing, schemathesis and
# sushy-tools (pinned) in their venv at /opt/longhaul-venv, and the Rust components rustfmt and clippy. Runs as root
# (the tests make namespaces, TUN devices and forced socket buffers; it asks sudo otherwise), with no
# standard input. A test that cannot run here fails with the reason; with LONGHAUL_TEST_SKIP=1 it is
# skipped instead and printed as `skipped: <test>: <reason>`, and the closing lines count them. Ends
# with the totals over every test binary: `tests: N passed, N failed`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "scripts/test.sh: run it as root (no sudo here)" >&2; exit 1; }
    # sudo resets PATH (secure_path): keep the caller's, where rustup's cargo is; -E keeps RUSTUP_HOME etc.
    exec sudo -E env "PATH=$PATH" bash "$0" "$@"
fi
export DEBIAN_FRONTEND=noninteractive CARGO_TERM_COLOR=never

step() { printf '\n== %s\n' "$*"; }

step "Debian packages (scripts/test-packages.txt)"
need=()
for pkg in $(sed 's/#.*//' scripts/test-packages.txt); do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "installing: ${need[*]}"
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${need[@]}"
else
    echo "all installed"
fi

step "schemathesis (the API fuzzer of tests/testbed_api_fuzz.rs), pinned, in its own venv"
# The test looks for /opt/longhaul-venv/bin/schemathesis (LONGHAUL_SCHEMATHESIS overrides) and fails
# without it. Debian's python3, so the venv does not depend on a user's pyenv.
SCHEMATHESIS_VERSION=4.32.5
venv=/opt/longhaul-venv
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
"$venv/bin/schemathesis" --version 2>/dev/null | grep -qx "schemathesis, version $SCHEMATHESIS_VERSION" ||
    "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
"$venv/bin/schemathesis" --version

step "sushy-tools (the Redfish BMC of tests/testbed_power.rs), pinned, in the same venv"
# The test looks for /opt/longhaul-venv/bin/sushy-emulator (LONGHAUL_SUSHY_EMULATOR overrides).
SUSHY_TOOLS_VERSION=2.2.0
"$venv/bin/pip" show sushy-tools 2>/dev/null | grep -qx "Version: $SUSHY_TOOLS_VERSION" ||
    "$venv/bin/pip" install --quiet --disable-pip-version-check "sushy-tools==$SUSHY_TOOLS_VERSION"
"$venv/bin/pip" show sushy-tools | grep '^Version:'

step "Rust components"
command -v cargo >/dev/null || { echo "no cargo on PATH: install a Rust toolchain first (https://rustup.rs)" >&2; exit 1; }
if command -v rustup >/dev/null; then
    rustup component add rustfmt clippy >/dev/null
fi
cargo --version

[ "${1-}" = --install ] && exit 0

if [ $# -gt 0 ]; then args=("$@"); else args=(--workspace); fi
step "cargo test ${args[*]}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test "${args[@]}" 2>&1 | tee "$log" || status=$?

# The tests that could not run here (only with LONGHAUL_TEST_SKIP=1; otherwise they failed), by
# reason; longhaul_testkit writes them as `skipped: <test>: <reason>`, past the harness's capture.
skipped=$(grep -o 'skipped: [^ ]*: .*' "$log" | sort -u || true)
if [ -n "$skipped" ]; then
    printf '\n%s\n' "$skipped"
    printf 'skipped: %d tests (LONGHAUL_TEST_SKIP=1; cargo counts them as passed), for these reasons:\n' \
        "$(printf '%s\n' "$skipped" | wc -l)"
    printf '%s\n' "$skipped" | sed 's/^skipped: [^ ]*: //' | sort | uniq -c | sort -rn
fi
# Why each failed test failed, just above the totals: the panic's place and message (the first
# 4,000 characters, in lines of 800), so that a log cut to its last lines still says it. A backtrace
# (RUST_BACKTRACE set) would otherwise push the message out of the log's tail.
if [ "$status" -ne 0 ]; then
    awk 'function flush() { if (name != "") { m = substr(msg, 1, 4000); printf "%s at %s\n", name, at
                                                for (i = 1; i <= length(m); i += 800) printf "  %s\n", substr(m, i, 800) }
                            name = ""; msg = "" }
         /^thread .* panicked at / { flush(); if (++n > 5) { name = ""; next }
                                     name = $2; gsub(/\047/, "", name); at = $NF; sub(/:$/, "", at); inmsg = 1; next }
         inmsg && (/^stack backtrace:/ || /^note: run with/ || /^---- / || /^failures:/) { inmsg = 0; next }
         inmsg { msg = msg (msg == "" ? "" : " / ") $0 }
         END { flush() }' "$log" | { printf '\nwhy the failed tests failed:\n'; cat; }
fi
# One closing line with the totals over every test binary (cargo prints one "test result" per binary,
# the last often a doc-test run with 0 tests).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed;?$/) p += $(i-1); if ($i ~ /^failed;?$/) f += $(i-1) } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
