#!/usr/bin/env bash
# Runs `swift test` with the given arguments and, when it fails, repeats every failing test's lines at the end:
# CI keeps only the tail of a run's output, and a failure among a thousand tests' lines is otherwise lost there.
set -uo pipefail
swift_bin=${SWIFT:-swift}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
$swift_bin test "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  echo "=== swift test exited $status; its failures:"
  grep -E '✘|^error: |Fatal error|fatal error|[Ss]ignal code|ERROR: [A-Za-z]*Sanitizer|WARNING: ThreadSanitizer|^SUMMARY: |^    #[0-9] .*(Tests|Sources)/' "$log" | head -80
fi
exit "$status"
