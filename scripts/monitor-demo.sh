#!/usr/bin/env bash
# "A day in a minute" (issue 15, docs/monitor.md): `longhaul monitor` watching the DataTAG 2003
# triangle (CERN Geneva, StarLight Chicago, NetherLight Amsterdam; the emulator's datatag-2003
# network) while a fault is injected on the Geneva-Chicago link, first loss, then a route change
# around it through Amsterdam, and removed again. At each step it asks the monitor what its grid
# shows and checks it: red for exactly the two pairs crossing the link, the alert firing, the path
# change found, and everything green again at the end. Needs root (network namespaces).
#
#   scripts/monitor-demo.sh            run it; exit 0 when every check held
#
# LONGHAUL picks the binary (default target/release/longhaul, else target/debug/longhaul). The
# monitor runs on cern1 (its controller connections cross the emulated network, as a real one's
# would); its dashboard is on 127.0.0.1:7069 inside cern1's namespace (lh-mdemo-cern1).
set -euo pipefail
cd "$(dirname "$0")/.."
lh=${LONGHAUL:-}
if [ -z "$lh" ]; then
    lh=target/release/longhaul
    [ -x "$lh" ] || lh=target/debug/longhaul
fi
lh=$(realpath "$lh")
name=mdemo
work=$(mktemp -d /tmp/lh-monitor-demo-XXXXXX)
cleanup() {
    pkill -f -- "--controllers $work/controllers.toml" 2>/dev/null || true
    pkill -f -- "monitor run $work/demo.toml" 2>/dev/null || true
    "$lh" emulate down --name "$name" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
t0=$(date +%s)
say() { printf '[%3ss] %s\n' $(( $(date +%s) - t0 )) "$*"; }
fail() {
    say "FAILED: $*"
    echo "--- the monitor's log:"
    tail -20 "$work/monitor.log" 2>/dev/null
    exit 1
}

# The monitor's API, from cern1's namespace: `api PATH` prints the JSON.
api() {
    "$lh" emulate exec --name "$name" cern1 -- python3 -c \
        'import sys, urllib.request; print(urllib.request.urlopen("http://127.0.0.1:7069" + sys.argv[1]).read().decode())' "$1" \
        2>/dev/null
}
# The grid as the dashboard colours it, from the latest latency result of each pair: prints
# `SRC->DST colour` lines (green: no loss; red: loss of 1 % or more, a failure, or an alert).
grid() {
    { api /api/v1/results?since=600; echo; api /api/v1/alerts; } | python3 -c '
import json, sys
results, alerts = (json.loads(l) for l in sys.stdin.read().strip().split("\n") if l.strip())
latest = {}
for r in results:
    if r["test"] == "lat":
        latest[(r["src"], r["dst"])] = r
firing = {(a["src"], a["dst"]) for a in alerts}
for (s, d), r in sorted(latest.items()):
    bad = r["status"] != "ok" or (r["loss"] or 0) >= 0.01 or (s, d) in firing
    print(s + "->" + d, "red" if bad else "green")'
}
# The pairs the grid shows red, space-separated.
red() { grid | awk '$2 == "red" { print $1 }' | sort | tr '\n' ' ' | sed 's/ $//'; }
# Waits up to $2 seconds for `$1` (a shell condition) to hold.
wait_for() {
    local until=$(( $(date +%s) + $2 ))
    until eval "$1"; do
        [ "$(date +%s)" -lt "$until" ] || return 1
        sleep 1
    done
}
alert_firing() { api /api/v1/alerts | grep -q "\"alert\":\"$1\""; }
event_count() { api /api/v1/events?since=600 | python3 -c \
    "import json,sys; print(sum(1 for e in json.load(sys.stdin) if e['kind'] == '$1'))"; }

say "the DataTAG 2003 triangle: cern1 (Geneva), starlight1 (Chicago), uva1 (Amsterdam)"
"$lh" keygen "$work/mon.key" >/dev/null 2>&1
printf '[[controller]]\nname = "demo"\nkey = "mon.key"\nmax_jobs = 16\n' >"$work/controllers.toml"
"$lh" emulate up datatag-2003 --name "$name" --no-server --no-calibration >/dev/null
for h in cern1 starlight1 uva1; do
    "$lh" emulate exec --name "$name" "$h" -- \
        "$lh" server --controllers "$work/controllers.toml" --log warn >/dev/null 2>&1 &
done
ip_of() { "$lh" emulate exec --name "$name" cern1 -- sh -c "echo \$LH_HOST_${1^^}"; }
cat >"$work/demo.toml" <<EOF
name = "datatag"
[[host]]
name = "cern1"
address = "$(ip_of cern1)"
lat = 46.23
lon = 6.05
groups = ["all"]
[[host]]
name = "starlight1"
address = "$(ip_of starlight1)"
lat = 41.90
lon = -87.63
groups = ["all"]
[[host]]
name = "uva1"
address = "$(ip_of uva1)"
lat = 52.36
lon = 4.95
groups = ["all"]

[[test]]
name = "lat"
kind = "latency"
from = ["all"]
every = "5s"

[[test]]
name = "trace"
kind = "traceroute"
from = ["all"]
every = "5s"
slip = "1s"

[[alert]]
name = "lossy"
when = "loss_above"
value = 1
after = 2
clear_after = 2

[[alert]]
name = "slower"
when = "rtt_above"
value = 5
tests = ["lat"]
after = 2
clear_after = 2

[[alert]]
name = "moved"
when = "path_changed"
EOF
sleep 2
"$lh" emulate exec --name "$name" cern1 -- "$lh" monitor run "$work/demo.toml" --key "$work/mon.key" \
    --archive "$work/demo.sqlite" --probe-interval 20ms --log warn >"$work/monitor.log" 2>&1 &
say "monitor running on cern1: latency streams and traceroutes every 5 s between all three"

wait_for '[ "$(grid | grep -c green)" = 6 ]' 40 || fail "the grid never showed six green pairs: $(grid)"
sleep 10 # a baseline of a few windows for the RTT rule
say "baseline: all six pairs green"

"$lh" emulate link --name "$name" gva-chi set --loss 5% >/dev/null
say "FAULT 1: 5 % loss on the Geneva-Chicago link (gva-chi)"
wait_for 'alert_firing lossy' 30 || fail "the loss alert never fired"
wait_for '[ "$(red)" = "cern1->starlight1 starlight1->cern1" ]' 15 ||
    fail "red pairs: '$(red)', not exactly the two crossing gva-chi"
say "grid: red for exactly $(red); alert 'lossy' firing"

"$lh" emulate link --name "$name" gva-chi set --loss 0 >/dev/null
say "loss removed"
wait_for '! alert_firing lossy' 30 || fail "the loss alert never cleared"
say "alert 'lossy' cleared"

before=$(event_count path_change)
"$lh" emulate route --name "$name" cern1 starlight1 --via gva,ams,chi >/dev/null
say "FAULT 2: cern1 <-> starlight1 rerouted around gva-chi, through Amsterdam (gva,ams,chi)"
wait_for '[ "$(event_count path_change)" -ge $((before + 2)) ]' 20 ||
    fail "no path change found in both directions"
wait_for 'alert_firing slower' 30 || fail "the RTT alert never fired for the longer route"
say "path change found both ways (traceroute diff in the dashboard); alert 'slower' firing"
api /api/v1/events?since=600 | python3 -c '
import json, sys
for e in json.load(sys.stdin):
    if e["kind"] == "path_change":
        print("         %s -> %s: %s  =>  %s" % (e["src"], e["dst"], e["detail"]["before"], e["detail"]["after"]))' | tail -2

"$lh" emulate route --name "$name" cern1 starlight1 --via gva,chi >/dev/null
say "route restored"
wait_for '! alert_firing slower && ! alert_firing lossy && ! alert_firing moved' 40 ||
    fail "alerts still firing: $(api /api/v1/alerts)"
wait_for '[ "$(grid | grep -c green)" = 6 ]' 20 || fail "not all green again: $(grid)"
say "all six pairs green again, no alert firing"
say "demo passed; $(api /api/v1/results?since=600 | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))') results archived"
