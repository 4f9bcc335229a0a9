#!/bin/sh
# Prints the Common Test cases that failed in the newest run under
# _build/test/logs (suite, case, and the head of the reason), so that a CI
# log whose tail is all one sees still names them.
cd "$(dirname "$0")/.."
run=$(ls -dt _build/test/logs/ct_run.* 2>/dev/null | head -n 1)
[ -n "$run" ] || { echo "no Common Test run under _build/test/logs"; exit 0; }
printf '\n==> failed Common Test cases (%s)\n' "$run"
for log in "$run"/*/run.*/suite.log; do
    [ -f "$log" ] || continue
    awk '/^=case/ { c = $2; next }
         /^=result/ { n = 0; bad = ($2 !~ /^(ok|skipped|auto_skipped)/)
                      if (bad) { r = $0; sub(/^=result +/, "", r); print "  " c ": " r }
                      next }
         /^=/ { bad = 0 }
         bad && n < 12 { print "      " $0; n++ }' "$log"
done
