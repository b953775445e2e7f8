#!/usr/bin/env bash
# E2B's own test suites, unmodified, against the server compat/e2b/run.sh
# started (run.sh calls this for its upstream-* suites, with E2B_API_URL,
# E2B_SANDBOX_URL and E2B_API_KEY set). The tests are read from checkouts
# of E2B's repositories, never copied into this one:
#   E2B_UPSTREAM_SRC     a checkout of e2b-dev/E2B (packages/python-sdk)
#   E2B_CI_UPSTREAM_SRC  a checkout of e2b-dev/code-interpreter (python/)
#   UPSTREAM_OUT         where each suite's JUnit report and log go
#                        (default /tmp/e2b-upstream)
# They run with the SDKs run.sh pins (the package sources beside the tests
# are left out, so the installed SDK is what they import), plus the pytest
# plugins E2B's suites need (pytest-asyncio, pytest-timeout, pytest-xdist,
# pytest-dotenv), installed once into a venv of their own.
# The JS suites (upstream-js: packages/js-sdk/tests; upstream-ci-js: the
# code interpreter's js/tests) run with vitest from upstream-js/ (its
# package-lock.json pins vitest, msw and the same SDKs as ts/), copied into
# upstream-js/.trees/ so that they resolve those packages; its
# vitest.config.mjs makes the tests' imports of the SDK's source the
# installed package. COMPAT_ONLY is vitest's -t there; UPSTREAM_FILES
# (space-separated) names the test files to run.
# Usage: upstream.sh VENV SUITE...   SUITE: upstream-py-sync, upstream-py-async,
#        upstream-py-shared, upstream-ci-py, upstream-js, upstream-ci-js
# COMPAT_ONLY=PATTERN runs only the tests whose names match (pytest -k).
# A suite's failures do not fail the script: they are what it reports.
set -euo pipefail
venv=$1
shift
out=${UPSTREAM_OUT:-/tmp/e2b-upstream}
mkdir -p "$out"
log() { echo "compat/e2b/upstream: $*" >&2; }
here=$(cd "$(dirname "$0")" && pwd)
js=$here/upstream-js
if [[ " $* " == *"-js "* && ! -e $js/node_modules/.installed-$(sha256sum "$js/package-lock.json" | cut -c1-16) ]]; then
	log "installing vitest and the SDKs for the JS suites (npm ci)"
	(cd "$js" && npm ci --no-audit --no-fund --cache "${WITHRUNTIME_COMPAT_CACHE:-/var/cache/withruntime/compat-e2b}/npm" >&2)
	touch "$js/node_modules/.installed-$(sha256sum "$js/package-lock.json" | cut -c1-16)"
fi
if [[ " $* " == *" upstream-py"* || " $* " == *" upstream-ci-py"* ]] && [[ ! -e $venv/.upstream-ready ]]; then
	"$venv/bin/pip" install -q --disable-pip-version-check 'pytest-asyncio>=1.3,<2' 'pytest-timeout>=2.4,<3' \
		'pytest-xdist>=3.3,<4' 'pytest-dotenv>=0.5.2,<0.6' 'python-dotenv>=1,<2'
	touch "$venv/.upstream-ready"
fi
# UPSTREAM_PREPARE_ONLY=1: the installs above, no suite (run.sh does this
# before a domain-mode suite, whose resolver names only the run's domain).
[[ -z ${UPSTREAM_PREPARE_ONLY:-} ]] || exit 0
# tree SRC DIR...: a scratch copy of DIRs of the checkout SRC (pytest.ini
# and the tests, no SDK source).
tree() {
	local src=$1 t
	shift
	t=$(mktemp -d /tmp/e2b-upstream-tree.XXXXXX)
	for d in "$@"; do
		mkdir -p "$t/$(dirname "$d")"
		cp -r "$src/$d" "$t/$d"
	done
	echo "$t"
}
# run NAME DIR ARGS...: pytest in DIR, its report in $out/NAME.xml.
run() {
	local name=$1 dir=$2
	shift 2
	log "$name: pytest $*"
	(cd "$dir" && env -u PYTHONPATH "$venv/bin/pytest" -q -p no:cacheprovider -p no:randomly --junitxml="$out/$name.xml" \
		-o junit_family=xunit2 ${COMPAT_ONLY:+-k "$COMPAT_ONLY"} "$@" >"$out/$name.log" 2>&1) || true
	tail -n 1 "$out/$name.log" >&2
}
# runjs NAME PKG DIR: E2B's JS tests in DIR/tests (a checkout's), with PKG
# as the SDK's source; the report in $out/NAME.xml.
runjs() {
	local name=$1 pkg=$2 src=$3 t
	mkdir -p "$js/.trees"
	t=$(mktemp -d "$js/.trees/$name.XXXXXX")
	cp -r "$src/tests" "$t/tests"
	log "$name: vitest (${COMPAT_ONLY:-all})"
	(cd "$t" && UPSTREAM_PKG=$pkg "$js/node_modules/.bin/vitest" run --config "$js/vitest.config.mjs" --root "$t" \
		--outputFile.junit="$out/$name.xml" ${COMPAT_ONLY:+-t "$COMPAT_ONLY"} ${UPSTREAM_FILES:-} >"$out/$name.log" 2>&1) || true
	grep -E '^ *(Test Files|Tests) ' "$out/$name.log" >&2 || tail -n 3 "$out/$name.log" >&2
	rm -rf "$t"
}
for s in "$@"; do
	case $s in
	upstream-py-sync | upstream-py-async | upstream-py-shared)
		: "${E2B_UPSTREAM_SRC:?set E2B_UPSTREAM_SRC to a checkout of e2b-dev/E2B}"
		t=$(tree "$E2B_UPSTREAM_SRC/packages/python-sdk" pytest.ini tests)
		run "$s" "$t/tests/.." --timeout=120 "tests/${s#upstream-py-}"
		rm -rf "$t"
		;;
	upstream-ci-py)
		: "${E2B_CI_UPSTREAM_SRC:?set E2B_CI_UPSTREAM_SRC to a checkout of e2b-dev/code-interpreter}"
		t=$(tree "$E2B_CI_UPSTREAM_SRC/python" pytest.ini tests)
		run "$s" "$t" -o addopts=--import-mode=importlib --timeout=120 tests
		rm -rf "$t"
		;;
	upstream-js)
		: "${E2B_UPSTREAM_SRC:?set E2B_UPSTREAM_SRC to a checkout of e2b-dev/E2B}"
		runjs "$s" e2b "$E2B_UPSTREAM_SRC/packages/js-sdk"
		;;
	upstream-ci-js)
		: "${E2B_CI_UPSTREAM_SRC:?set E2B_CI_UPSTREAM_SRC to a checkout of e2b-dev/code-interpreter}"
		runjs "$s" @e2b/code-interpreter "$E2B_CI_UPSTREAM_SRC/js"
		;;
	*) log "unknown suite $s"; exit 2 ;;
	esac
done
