#!/usr/bin/env bash
# The test command from the README: every test, under the race detector.
#
# Tests run through gotestsum (pinned in scripts/tools/go.mod), which prints
# each test as it finishes, so a long package shows progress, and at the end
# the output of every failure. Each test binary gets at most
# FC_TEST_TIMEOUT (10m): a test that hangs fails with its goroutine dump well
# before CI's limit. The whole suite takes 3 to 5 minutes on 2 cores; the
# channel package, the longest, took 7 minutes once with a second suite
# running beside it, hence the margin.
set -euo pipefail
cd "$(dirname "$0")/.."
timeout="${FC_TEST_TIMEOUT:-10m}"

bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
# Build the runner with the tools module's own go.mod (a nested module, so
# the library's go.mod stays free of it); -mod=readonly keeps go.sum honest.
(cd scripts/tools && GOFLAGS=-mod=readonly go build -o "$bin/gotestsum" gotest.tools/gotestsum)

format=testname
if [ -t 1 ]; then
  format=pkgname-and-test-fails # a terminal: one line per package, failures in full
  if [ -n "${FC_TEST_VERBOSE:-}" ]; then format=testname; fi
fi
"$bin/gotestsum" --format "$format" --format-hide-empty-pkg -- \
  -race -count=1 -timeout "$timeout" "$@" ./...
