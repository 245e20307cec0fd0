#!/usr/bin/env bash
# Sustained HTTP load on the testbed reservation service (issue 6): wrk (bench/testbed_http.lua)
# against the release `longhaul testbed serve`, on SQLite and on PostgreSQL, for
#   freebusy   GET /api/v1/freebusy over a week window for a resource with 200 bookings in it
#   book       POST /api/v1/bookings, every request a distinct slot the policy allows (all should be
#              201), USERS users each on their own resource
#   contended  POST /api/v1/bookings of 32 slots of one resource at random: mostly 409 conflict
# at each connection count in CONNS (2 wrk threads), DURATION seconds each, REPS times over (the
# databases alternate within a repetition). Prints median requests/s, median and p99 latency per
# case and the response statuses; after the booking runs it lists every booking through the API and
# checks that no two live bookings of a resource overlap (no double booking under load) and that
# the live bookings are the 201s counted (plus at most one per connection still in flight when wrk
# stopped counting).
#
# Usage: bench/testbed_http.sh [DURATION] [REPS] [CONNS] [DBS]
#   defaults: 20 s, 2 repetitions, CONNS="8 64", DBS="sqlite postgres"
# The SQLite database is a file under a temporary directory on /tmp (the VM's disk); PostgreSQL 15 is
# a throwaway cluster this script creates (initdb as the postgres user into that directory, Debian's
# default settings: fsync and synchronous_commit on, as SQLite's WAL with synchronous=FULL), stopped
# and removed at exit. Needs root for PostgreSQL (runuser); installs wrk if missing.
# Output: the table on stdout; raw rows with the exact wrk commands and each run's output in
# bench/runs/<UTC date>-testbed_http/.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-20}
REPS=${2:-2}
CONNS=${3:-"8 64"}
DBS=${4:-"sqlite postgres"}
THREADS=2
USERS=300
PG_BIN=/usr/lib/postgresql/15/bin

if ! command -v wrk >/dev/null; then
    echo "installing wrk (Debian package) ..." >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends wrk >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends wrk >/dev/null; }
fi
case " $DBS " in *" postgres "*)
    [ "$(id -u)" = 0 ] || { echo "bench/testbed_http.sh: PostgreSQL runs as the postgres user: needs root (or DBS=sqlite)" >&2; exit 1; }
    [ -x "$PG_BIN/initdb" ] || { echo "no $PG_BIN/initdb: apt-get install postgresql" >&2; exit 1; }
esac
cargo build --release --quiet
LH=$PWD/target/release/longhaul
LUA=$PWD/bench/testbed_http.lua

out=$PWD/bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-testbed_http
mkdir -p "$out"
raw=$out/raw.csv
echo "rep,db,case,conns,threads,seconds,requests,rps,p50_ms,p90_ms,p99_ms,max_ms,non2xx,socket_errors,statuses,loadavg,command" >"$raw"
work=$(mktemp -d /tmp/lh-bench-http.XXXXXX)
chmod 755 "$work"
server_pid=
pg_data=

cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
    if [ -n "$pg_data" ]; then
        runuser -u postgres -- "$PG_BIN/pg_ctl" -m immediate -D "$pg_data" stop >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# --- the inventory: a site with a free/busy resource, a contended one, and one per booking user ------
ncases=$(wc -w <<<"$CONNS")
{
    printf '[[resource]]\nid = "bench"\nkind = "site"\n\n'
    printf '[[resource]]\nid = "bench/fb"\nkind = "link"\n\n'
    printf '[[resource]]\nid = "bench/hot"\nkind = "link"\n\n'
    for k in $(seq 0 $((ncases - 1))); do
        for u in $(seq 0 $((USERS - 1))); do
            printf '[[resource]]\nid = "bench/k%d-r%d"\nkind = "host"\n\n' "$k" "$u"
        done
    done
} >"$work/inventory.toml"

# --- PostgreSQL: one cluster for the whole run, a fresh database per repetition ------------------------
pg_port=
if [[ " $DBS " == *" postgres "* ]]; then
    pg_data=$work/pg/data
    mkdir -p "$work/pg" && chown postgres:postgres "$work/pg"
    runuser -u postgres -- "$PG_BIN/initdb" --auth=trust -U postgres -E UTF8 -D "$pg_data" >/dev/null
    pg_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    runuser -u postgres -- "$PG_BIN/pg_ctl" -w -D "$pg_data" -l "$work/pg/log" \
        -o "-p $pg_port -k $work/pg -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
fi

# new_database DB REP: a fresh, empty database; prints its URL.
new_database() {
    if [ "$1" = sqlite ]; then
        echo "$work/rep$2.sqlite"
    else
        "$PG_BIN/createdb" -h 127.0.0.1 -p "$pg_port" -U postgres "longhaul_bench_$2"
        echo "postgres://postgres@127.0.0.1:$pg_port/longhaul_bench_$2"
    fi
}

# tokens DBURL PREFIX N FILE: N users PREFIX0.. with one token each, one per line in FILE.
tokens() {
    : >"$4"
    for i in $(seq 0 $(($3 - 1))); do
        "$LH" testbed token add "$2$i" --role user --database "$1" >>"$4"
    done
}

start_server() { # DBURL -> $server_pid, $url
    "$LH" testbed serve --listen 127.0.0.1:0 --database "$1" --inventory "$work/inventory.toml" \
        --log warn 2>"$work/serve.log" &
    server_pid=$!
    for _ in $(seq 1 300); do
        url=$(sed -n 's/^longhaul testbed listening on \(http:[^ ]*\).*/\1/p' "$work/serve.log")
        [ -n "$url" ] && return
        sleep 0.1
    done
    cat "$work/serve.log" >&2
    exit 1
}

stop_server() {
    kill "$server_pid" && wait "$server_pid" 2>/dev/null || true
    server_pid=
}

# run REP DB CASE CONNS TOKENS TARGET: one wrk run, a row in raw.csv.
run() {
    local rep=$1 db=$2 case=$3 c=$4 toks=$5 target=$6
    local mode=$case t=$((c < THREADS ? c : THREADS)) # wrk needs a connection per thread
    local cmd="wrk -t $t -c $c -d ${DURATION}s --latency --timeout 10s -s bench/testbed_http.lua $url -- $mode $toks $t0 $t $target"
    local log=$out/$db-$case-c$c-rep$rep.txt
    local load
    load=$(cut -d' ' -f1 /proc/loadavg)
    echo "$cmd" >"$log"
    wrk -t "$t" -c "$c" -d "${DURATION}s" --latency --timeout 10s -s "$LUA" "$url" -- \
        "$mode" "$toks" "$t0" "$t" "$target" >>"$log" 2>&1 || { cat "$log" >&2; exit 1; }
    local line
    line=$(grep '^RESULT ' "$log") || { cat "$log" >&2; exit 1; }
    python3 - "$line" "$rep" "$db" "$case" "$c" "$t" "$load" "$cmd" >>"$raw" <<'EOF'
import csv, sys
line, rep, db, case, c, threads, load, cmd = sys.argv[1:]
kv = dict(p.split("=", 1) for p in line.split()[1:])
secs = int(kv["duration_us"]) / 1e6
ms = lambda k: "%.2f" % (int(kv[k]) / 1000)
statuses = " ".join("%s=%s" % (k[1:], v) for k, v in sorted(kv.items()) if k[0] == "s" and k[1:].isdigit())
sock = sum(int(kv[k]) for k in ("connect_errors", "read_errors", "write_errors", "timeouts"))
csv.writer(sys.stdout, lineterminator="\n").writerow([rep, db, case, c, threads, "%.2f" % secs, kv["requests"],
    "%.0f" % (int(kv["requests"]) / secs), ms("p50_us"), ms("p90_us"), ms("p99_us"), ms("max_us"), kv["non2xx"],
    sock, statuses, load, cmd])
EOF
    tail -n 1 "$raw" | cut -d, -f2-15 >&2
}

# check DB: every booking through the API; the 201s of each booking run are exactly its live
# bookings, and no two live bookings of one resource overlap.
check() {
    local db=$1 tok
    tok=$(head -n 1 "$work/fb-tokens.txt")
    curl -sf -H "Authorization: Bearer $tok" \
        "$url/api/v1/bookings?resource=bench&from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z" >"$work/all.json"
    python3 - "$work/all.json" "$raw" "$db" "$rep" <<'EOF'
import csv, json, sys
from collections import defaultdict
doc, raw, db, rep = sys.argv[1:]
bookings = [b for b in json.load(open(doc))["bookings"] if b["status"] in ("upcoming", "held", "active")]
by_res = defaultdict(list)
for b in bookings:
    by_res[b["resource"]].append((b["start"], b["end"], b["id"]))
overlaps = 0
for res, slots in by_res.items():
    slots.sort()
    for (s0, e0, i0), (s1, e1, i1) in zip(slots, slots[1:]):
        if s1 < e0:  # RFC 3339 UTC with Z and whole seconds: text order is time order
            overlaps += 1
            print(f"DOUBLE BOOKING on {res}: {i0} [{s0}, {e0}) and {i1} [{s1}, {e1})", file=sys.stderr)
rows = [r for r in csv.DictReader(open(raw)) if r["db"] == db and r["rep"] == rep]
bad = 0
for k, r in enumerate([r for r in rows if r["case"] == "book"]):
    # wrk stops counting at the deadline: up to one request per connection is still in flight
    # and may be booked without its 201 being counted.
    created = int(dict(s.split("=") for s in r["statuses"].split()).get("201", 0))
    live = sum(len(v) for res, v in by_res.items() if res.startswith(f"bench/k{k}-"))
    ok = created <= live <= created + int(r["conns"])
    bad += not ok
    print(f"  check {db} book c={r['conns']}: {created} x 201 counted, {live} live bookings ({'ok' if ok else 'WRONG'}: {live - created} in flight at the end)", file=sys.stderr)
for r in rows:
    if r["case"] == "contended":
        created = int(dict(s.split("=") for s in r["statuses"].split()).get("201", 0))
        live = len(by_res.get("bench/hot", []))
        bad += not created <= live <= 32
        print(f"  check {db} contended: {created} x 201 counted, {live} live bookings of bench/hot (32 slots)", file=sys.stderr)
print(f"  check {db}: {len(bookings)} live bookings, {overlaps} overlapping pairs", file=sys.stderr)
sys.exit(1 if overlaps or bad else 0)
EOF
}

# A whole hour, 2 h from now: the first slot (the policy refuses starts in the past).
t0=$(( ($(date +%s) / 3600 + 2) * 3600 ))

for rep in $(seq 1 "$REPS"); do
    for db in $DBS; do
        echo "== rep $rep, $db" >&2
        dburl=$(new_database "$db" "$rep")
        tokens "$dburl" f 10 "$work/fb-tokens.txt"
        k=0
        for c in $CONNS; do
            tokens "$dburl" "k${k}u" "$USERS" "$work/book-tokens-$k.txt"
            k=$((k + 1))
        done
        start_server "$dburl"
        # 200 bookings of 15 min on bench/fb, 50 min apart, by ten users in turn (each 5 h in the week,
        # 8 h 20 min between one user's bookings).
        python3 - "$url" "$work/fb-tokens.txt" "$t0" <<'EOF'
import json, sys, time, urllib.request
url, toks, t0 = sys.argv[1], open(sys.argv[2]).read().split(), int(sys.argv[3])
iso = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
for k in range(200):
    s = t0 + k * 3000
    body = json.dumps({"resource": "bench/fb", "start": iso(s), "end": iso(s + 900)}).encode()
    req = urllib.request.Request(url + "/api/v1/bookings", body, {"Authorization": "Bearer " + toks[k % 10], "Content-Type": "application/json"})
    assert urllib.request.urlopen(req).status == 201
EOF
        for c in $CONNS; do run "$rep" "$db" freebusy "$c" "$work/fb-tokens.txt" bench/fb; done
        k=0
        for c in $CONNS; do
            run "$rep" "$db" book "$c" "$work/book-tokens-$k.txt" "bench/k$k-r"
            k=$((k + 1))
        done
        cmax=$(tr ' ' '\n' <<<"$CONNS" | sort -n | tail -n 1)
        run "$rep" "$db" contended "$cmax" "$work/fb-tokens.txt" bench/hot
        check "$db"
        stop_server
    done
done

# --- medians over the repetitions -----------------------------------------------------------------
python3 - "$raw" <<'EOF' | tee "$out/table.md"
import csv, statistics, sys
from collections import defaultdict
rows = list(csv.DictReader(open(sys.argv[1])))
groups = defaultdict(list)
for r in rows:
    groups[(r["case"], r["db"], int(r["conns"]))].append(r)
med = lambda rs, k: statistics.median(float(r[k]) for r in rs)
print(f"\n{len(set(r['rep'] for r in rows))} repetitions; medians (min-max of req/s)\n")
print("| endpoint | database | connections | requests/s (median) | req/s min-max | p50 ms | p99 ms | non-2xx (per run) | statuses (per run, median) |")
print("|---|---|---|---|---|---|---|---|---|")
order = {"freebusy": 0, "book": 1, "contended": 2}
for (case, db, c), rs in sorted(groups.items(), key=lambda x: (order[x[0][0]], x[0][1], x[0][2])):
    st = defaultdict(list)
    for r in rs:
        for s in r["statuses"].split():
            k, v = s.split("=")
            st[k].append(int(v))
    stat = ", ".join(f"{k}: {statistics.median(v):.0f}" for k, v in sorted(st.items()))
    rps = [float(r["rps"]) for r in rs]
    print(f"| {case} | {db} | {c} | {med(rs, 'rps'):.0f} | {min(rps):.0f}-{max(rps):.0f} | {med(rs, 'p50_ms'):.2f} | {med(rs, 'p99_ms'):.2f} | {med(rs, 'non2xx'):.0f} | {stat} |")
EOF
echo "raw rows: ${raw#"$PWD"/}" >&2
