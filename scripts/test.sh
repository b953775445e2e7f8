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

export WITHRUNTIME_RUNSC=/usr/local/bin/runsc
echo "test: go vet" >&2
go vet ./...
echo "test: go test (real gVisor sandboxes)" >&2
go test -count=1 -timeout 40m "$@" ./...
# Fuzzing of the API's request decoders and handlers, bounded (~1.5 min).
# A failing input is saved under internal/api/testdata/fuzz and then runs
# with every `go test`.
fuzz_start=$SECONDS
for target in FuzzDecode:30s FuzzAPI:40s FuzzAuthorization:15s; do
  echo "test: fuzz ${target%%:*} for ${target##*:}" >&2
  go test -run '^$' -fuzz "^${target%%:*}\$" -fuzztime "${target##*:}" ./internal/api
done
echo "test: fuzzing took $((SECONDS - fuzz_start)) s" >&2
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
