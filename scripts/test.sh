#!/usr/bin/env bash
# Runs Runtime's whole test suite on this host, as root: installs what the
# tests need (scripts/install.sh --template: Debian packages, the pinned runsc
# build, the binaries, the base template — all cached, so a second run starts
# at once), then runs every suite, printing each one's time and a summary at
# the end so that slow suites show. Sandboxes in the tests are real gVisor
# sandboxes; nothing is mocked.
#
# Usage: scripts/test.sh [go test flags...]   (the flags go to the main `go test ./...`)
set -euo pipefail
cd "$(dirname "$0")/.."

# Each suite's time (and FAILED) goes to a file, so suites run in a lane
# (a background subshell, below) are counted too.
timings=$(mktemp /tmp/withruntime-test-times.XXXXXX)
# suite NAME CMD...: runs one suite and records its time and result.
suite() {
	local name=$1 start=$SECONDS rc=0
	shift
	echo "test: == $name" >&2
	"$@" || rc=$?
	printf '%5d s  %s%s\n' $((SECONDS - start)) "$name" "$([[ $rc -eq 0 ]] || echo "  FAILED ($rc)")" >>"$timings"
	return $rc
}
summary() {
	echo "test: suite times (wall clock $((SECONDS)) s):" >&2
	sed 's/^/test:   /' "$timings" >&2
	rm -f "$timings"
}
trap summary EXIT

# First, before anything else prepares the host: put it back the way a
# machine new to Runtime is and run README's first command as written
# (scripts/pristine-test.sh says what it removes and what stays cached).
suite "pristine host: README's first command" scripts/pristine-test.sh

# The dashboard's browser tests (internal/itest TestDashboardBrowser and
# TestDashboardTerminal) drive Debian's Chromium headless; Runtime itself
# does not need it.
if [[ $(dpkg-query -W -f='${db:Status-Abbrev}' chromium 2>/dev/null || true) != ii* ]]; then
	echo "test: installing chromium (the dashboard's browser test)" >&2
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >&2
fi

suite install scripts/install.sh --template
export WITHRUNTIME_RUNSC=/usr/local/bin/runsc
suite "go vet" go vet ./...
# internal/itest takes 33-43 min on the 2-core host (43 with the code
# interpreter's template rebuilt, under other load); 60 min leaves room
# inside CI's 90.
suite "go test ./... (real gVisor sandboxes)" go test -count=1 -timeout 60m "$@" ./...
# The suites after `go test` are independent of each other (each starts
# servers of its own on free ports with fresh data directories, whose
# sandbox networks have their own names), so they run in two lanes at once,
# each lane's suites in order; a failing suite does not stop its lane, and
# the run fails after both lanes end if any failed. Every output line is
# prefixed with its lane. The lanes are balanced by measured times: on
# the 2-core host (2026-12-07) the suites' times summed to 864 s, and the
# two lanes ended after 555 s.
lane() {
	local name=$1 failed=0
	shift
	for s in "$@"; do
		$s || failed=1
	done
	return $failed
}
# Fuzzing of the API's request decoders and handlers, bounded (~1.5 min).
# A failing input is saved under internal/api/testdata/fuzz and then runs
# with every `go test`.
fuzz() {
	local target rc=0
	for target in FuzzDecode:30s FuzzAPI:40s FuzzAuthorization:15s; do
		suite "fuzz ${target%%:*} ${target##*:}" go test -run '^$' -fuzz "^${target%%:*}\$" -fuzztime "${target##*:}" ./internal/api || rc=1
	done
	return $rc
}
# The unmodified e2b SDKs (Python and JS) against `serve --e2b-listen`, by
# E2B_API_URL/E2B_SANDBOX_URL and by E2B_DOMAIN (--e2b-domain over TLS with
# a test CA: openssl makes it).
command -v openssl >/dev/null || { apt-get update -qq >&2; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssl >&2; }
compat() { suite "compat/e2b (e2b SDKs, Python and JS; header and domain modes)" compat/e2b/run.sh; }
sdk_go() { suite "sdk/go" bash -c 'cd sdk/go && go test -count=1 ./...'; }
examples() { suite "examples (vet)" bash -c 'cd examples && go vet ./...'; } # run against a server by TestSDKExampleDispatch
testserver() { suite "adapters/go/testserver (vet)" bash -c 'cd adapters/go/testserver && go vet ./...'; }
go_adapters() {
	local a rc=0
	for a in eino openai anthropic genai; do
		suite "adapters/go/$a" bash -c "cd adapters/go/$a && go vet ./... && go test -count=1 ./..." || rc=1
	done
	return $rc
}
sdk_ts() { suite "sdk/typescript" bash -c 'cd sdk/typescript && npm ci --no-audit --no-fund && npm test'; }
sdk_py() { suite "sdk/python" bash -c "python3 -m venv sdk/python/.venv && sdk/python/.venv/bin/pip install -q -e 'sdk/python[test]' && sdk/python/.venv/bin/pytest -q sdk/python/tests"; }
adapters_ts() { suite "adapters/typescript" bash -c 'cd adapters/typescript && npm ci --no-audit --no-fund && npm test'; }
adapters_py() { suite "adapters/python" adapters/python/run-tests.sh; }

lane 1 compat sdk_go examples testserver go_adapters fuzz sdk_py > >(sed -u 's/^/[lane 1] /' >&2) 2>&1 &
lane1=$!
lane 2 sdk_ts adapters_ts adapters_py > >(sed -u 's/^/[lane 2] /' >&2) 2>&1 &
lane2=$!
rc=0
wait $lane1 || rc=1
wait $lane2 || rc=1
exit $rc
