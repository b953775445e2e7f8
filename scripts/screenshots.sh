#!/usr/bin/env bash
# Regenerates the dashboard screenshots in docs/screenshots: runs the
# browser tests (internal/itest TestDashboardBrowser and TestDashboardTerminal: a real server, real
# gVisor sandboxes, headless Chromium), which saves a PNG of each main page
# when WITHRUNTIME_SCREENSHOTS names a directory. Needs root, runsc and
# chromium, as scripts/test.sh installs them.
#
# Usage: scripts/screenshots.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out="$PWD/docs/screenshots"
mkdir -p "$out"
WITHRUNTIME_SCREENSHOTS="$out" WITHRUNTIME_RUNSC="${WITHRUNTIME_RUNSC:-/usr/local/bin/runsc}" \
	go test -count=1 -run 'TestDashboardBrowser$|TestDashboardTerminal$' ./internal/itest/
ls -l "$out"
