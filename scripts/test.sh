#!/usr/bin/env bash
# The test command from the README: every test, under the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -race -count=1 -timeout 20m ./...
