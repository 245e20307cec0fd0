#!/usr/bin/env bash
# Makes the upgrade fixtures of tests/upgrade.rs with a release's binary, once per release: what
# that release wrote, for every later release to open, migrate and read back the same.
#
#   sudo tests/data/upgrade/make.sh /path/to/longhaul     (root: the lab run uses namespaces)
#
# Writes, under tests/data/upgrade/VERSION/:
#   testbed.sqlite         a testbed database: the DataTAG inventory's resources booked by two
#                          users (a booking, a hold, a cancelled booking, an extended one)
#   tokens                 the two users' API tokens (user, admin), for the test to read it back
#   testbed-list.json      `testbed list --json` as that release printed it
#   lab/                   a lab archive: one reduced run of message-size (archive.sqlite and the
#                          run's result file)
#   lab-list.json          `lab list --json` as that release printed it
#   lab-show.json          `lab show RUN --json` as that release printed it
#   release                the binary's --version
set -euo pipefail
bin=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
version=$("$bin" -V | awk '{print $2}')
out=$here/$version
[ ! -e "$out" ] || { echo "$out exists: fixtures are made once per release" >&2; exit 1; }
mkdir -p "$out"
"$bin" --version > "$out/release"

# The testbed database.
db=$out/testbed.sqlite
user=$("$bin" testbed token add alice --role user --database "$db")
admin=$("$bin" testbed token add root --role admin --database "$db")
printf 'user %s\nadmin %s\n' "$user" "$admin" > "$out/tokens"
log=$(mktemp)
"$bin" testbed serve --listen 127.0.0.1:0 --database "$db" \
    --inventory "$here/../../../crates/testbed/testdata/datatag.toml" 2> "$log" &
serve=$!
trap 'kill $serve 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 100); do grep -q "listening on" "$log" && break; sleep 0.1; done
url=$(grep -o "http://[0-9.:]*" "$log" | head -1)
export LONGHAUL_TESTBED_URL=$url LONGHAUL_TESTBED_TOKEN=$user
day() { date -u -d "+$1 days" +%Y-%m-%d; }   # within the booking horizon
"$bin" testbed reserve cern/starlight-lambda/1g-a --from "$(day 10)T08:00:00Z" --to "$(day 10)T12:00:00Z" \
    --note "single stream, CUBIC" > /dev/null
"$bin" testbed reserve cern/starlight-lambda --from "$(day 11)T08:00:00Z" --to "$(day 11)T10:00:00Z" \
    --hold > /dev/null
cancelled=$("$bin" testbed reserve cern/starlight-lambda --from "$(day 12)T08:00:00Z" \
    --to "$(day 12)T10:00:00Z" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
"$bin" testbed cancel "$cancelled" > /dev/null
extended=$("$bin" testbed reserve cern/starlight-lambda/1g-a --from "$(day 13)T08:00:00Z" \
    --to "$(day 13)T10:00:00Z" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
"$bin" testbed extend "$extended" --to "$(day 13)T14:00:00Z" > /dev/null
"$bin" testbed list --from 2000-01-01T00:00:00Z --to 2100-01-01T00:00:00Z --json > "$out/testbed-list.json"
kill $serve; wait $serve 2>/dev/null || true
python3 -c 'import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute("pragma wal_checkpoint(truncate)")' "$db"
rm -f "$db-wal" "$db-shm"

# The lab archive.
"$bin" lab run message-size --reduced --archive "$out/lab" --json > /dev/null
"$bin" lab list --archive "$out/lab" --json > "$out/lab-list.json"
run=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["runs"][0]["id"])' "$out/lab-list.json")
"$bin" lab show "$run" --archive "$out/lab" --json > "$out/lab-show.json"
rm -rf "$out/lab/plots"
echo "$out"
