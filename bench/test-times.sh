#!/usr/bin/env bash
# Times each test file alone (wall, user, sys seconds) with the load average at its start.
# Usage: bench/test-times.sh OUT.tsv [files...]   (default: every file npm test runs, then the shared pass)
# EMCEEPEE_TEST_SHARING=shared rows are marked "shared". The TypeScript loads as npm test loads it
# (test/helpers/ts-register.mjs); EMCEEPEE_TEST_TS=tsx loads it through tsx instead.
set -u
out=${1:?output file}; shift
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then set -- test/unit/*.test.ts test/integration/*.test.ts; fi
loader=./test/helpers/ts-register.mjs; [ "${EMCEEPEE_TEST_TS:-}" = tsx ] && loader=tsx
[ "$loader" = tsx ] || node -e 'import("./test/helpers/ts-compile.mjs").then((m) => m.warm())'
: > "$out"
run() {
  local mode=$1 file=$2 load t
  load=$(cut -d' ' -f1 /proc/loadavg)
  local sharing=session; [ "$mode" = shared ] && sharing=shared
  EMCEEPEE_TEST_SHARING=$sharing /usr/bin/time -o /tmp/test-times.$$.time -f "%e\t%U\t%S" \
    node --import "$loader" --test --test-concurrency=1 --test-timeout=900000 "$file" >/tmp/test-times.$$.log 2>&1
  t=$(tail -1 /tmp/test-times.$$.time)
  local pass fail
  pass=$(grep -E '^# pass' /tmp/test-times.$$.log | awk '{print $3}')
  fail=$(grep -E '^# fail' /tmp/test-times.$$.log | awk '{print $3}')
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$file" "$mode" "$t" "$load" "$pass" "$fail" >> "$out"
  [ "${fail:-0}" != 0 ] && cp /tmp/test-times.$$.log "$out.$(basename "$file").$mode.log"
}
for f in "$@"; do run session "$f"; done
if [ -n "${SHARED_FILES:-}" ]; then for f in $SHARED_FILES; do run shared "$f"; done; fi
rm -f /tmp/test-times.$$.log /tmp/test-times.$$.time
