#!/usr/bin/env bash
# The test command from the README: every test, under the race detector.
#
# Tests run through gotestsum (pinned in scripts/tools/go.mod): on a
# terminal a line per package and the output of every failure, in a log a
# line per test; at the end the output of every failure again. Every
# FC_TEST_PROGRESS seconds (30; 0 turns it off) a progress line on stderr
# says how far the run is, so that the first run's race builds and the
# channel package's crash tests are not minutes of silence. Each test
# binary gets at most FC_TEST_TIMEOUT (20m): a test that hangs fails with
# its goroutine dump well before CI's limit. The channel package, the
# longest, takes 5-7 min under -race on 2 cores (its crash enumerations
# most of it), and passed 10m on 2 cores shared with three other
# builds; the margin is for busier machines.
set -euo pipefail
cd "$(dirname "$0")/.."
timeout="${FC_TEST_TIMEOUT:-20m}"
every="${FC_TEST_PROGRESS:-30}"
case "$every" in
'' | *[!0-9]*) echo "test.sh: FC_TEST_PROGRESS=$every: want a number of seconds (0: no progress lines)" >&2; exit 2 ;;
esac
every=$((10#$every))

bin="$(mktemp -d)"
progress_pid=
cleanup() {
  if [ -n "$progress_pid" ]; then kill "$progress_pid" 2>/dev/null || true; fi
  rm -rf "$bin"
}
trap cleanup EXIT
# Build the runner with the tools module's own go.mod (a nested module, so
# the library's go.mod stays free of it); -mod=readonly keeps go.sum honest.
(cd scripts/tools && GOFLAGS=-mod=readonly go build -o "$bin/gotestsum" gotest.tools/gotestsum)

format=testname
if [ -t 1 ]; then
  format=pkgname-and-test-fails # a terminal: one line per package, failures in full
  if [ -n "${FC_TEST_VERBOSE:-}" ]; then format=testname; fi
fi

# progress prints, every $every seconds, how many packages and tests are
# done and which packages are running, from the events gotestsum records
# in $events. It ends when the script does.
events="$bin/events.json"
progress() {
  local packages start=$SECONDS tick=0 line
  packages=$(go list ./... | wc -l)
  while kill -0 $$ 2>/dev/null; do
    sleep 1
    tick=$((tick + 1))
    if [ $((tick % every)) -ne 0 ]; then continue; fi
    line=$(printf 'test.sh: %dm%02ds:' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)))
    if ! grep -q '"Action":"start"' "$events" 2>/dev/null; then
      echo "$line building the packages and their tests with -race (the first run also downloads modules)" >&2
      continue
    fi
    local finished tests running
    finished=$(grep -cE '"Action":"(pass|fail|skip)","Package":"[^"]*"(}|,"(Elapsed|FailedBuild)")' "$events" || true)
    tests=$(grep -cE '"Action":"(pass|fail|skip)","Package":"[^"]*","Test"' "$events" || true)
    running=$(comm -23 \
      <(grep -o '"Action":"start","Package":"[^"]*"' "$events" | sed 's/.*"Package":"//; s/"$//' | sort) \
      <(grep -oE '"Action":"(pass|fail|skip)","Package":"[^"]*"(}|,"(Elapsed|FailedBuild)")' "$events" |
        sed 's/.*"Package":"//; s/".*//' | sort) |
      sed 's|^github.com/flumego/filechannel/||' | paste -sd ' ' -)
    echo "$line $finished of $packages packages and $tests tests done; running: ${running:-(building)}" >&2
  done
}
if [ "$every" -gt 0 ]; then
  echo "test.sh: every package's tests under the race detector; a progress line every ${every}s" >&2
  progress &
  progress_pid=$!
fi

"$bin/gotestsum" --format "$format" --format-hide-empty-pkg --jsonfile "$events" -- \
  -race -count=1 -timeout "$timeout" "$@" ./...
