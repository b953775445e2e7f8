#!/usr/bin/env bash
# Runs Runtime's whole test suite on this host, as root: installs what the
# tests need (scripts/install.sh --template: Debian packages, the pinned runsc
# build, the binaries, the base template — all cached, so a second run starts
# at once), then runs every suite. Sandboxes in the tests are real gVisor
# sandboxes; nothing is mocked.
#
# Usage: scripts/test.sh [go test flags...]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install.sh --template

# The dashboard's browser test (internal/itest TestDashboardBrowser) drives
# Debian's Chromium headless; Runtime itself does not need it.
if [[ $(dpkg-query -W -f='${db:Status-Abbrev}' chromium 2>/dev/null || true) != ii* ]]; then
	echo "test: installing chromium (the dashboard's browser test)" >&2
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >&2
fi

export WITHRUNTIME_RUNSC=/usr/local/bin/runsc
echo "test: go vet" >&2
go vet ./...
echo "test: go test (real gVisor sandboxes)" >&2
go test -count=1 -timeout 40m "$@" ./...
(cd sdk/go && go test -count=1 ./...)
(cd examples && go vet ./...)  # run against a server by TestSDKExampleDispatch
(cd adapters/go/testserver && go vet ./...)
(cd adapters/go/eino && go vet ./... && go test -count=1 ./...)
(cd sdk/typescript && npm ci --no-audit --no-fund && npm test)
(python3 -m venv sdk/python/.venv && sdk/python/.venv/bin/pip install -q -e 'sdk/python[test]' && sdk/python/.venv/bin/pytest -q sdk/python/tests)
(cd adapters/typescript && npm ci --no-audit --no-fund && npm test)
adapters/python/run-tests.sh
(cd adapters/go/openai && go vet ./... && go test -count=1 ./...)
(cd adapters/go/anthropic && go vet ./... && go test -count=1 ./...)
(cd adapters/go/genai && go vet ./... && go test -count=1 ./...)
