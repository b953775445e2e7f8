#!/usr/bin/env bash
# The E2B compatibility suite: the unmodified e2b SDKs (PyPI e2b 2.63.0 and
# e2b-code-interpreter 2.11.5, npm e2b 2.51.0 and @e2b/code-interpreter 2.8.0,
# pinned by the lock files beside this script) against a real `withruntime
# serve --e2b-listen` with real gVisor sandboxes. The SDKs get only E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY (a
# tenant key); a second tenant's key is COMPAT_OTHER_API_KEY, for the tests
# that cross tenants.
#
# Needs root (the server runs gVisor), python3 and node/npm, and:
#   WITHRUNTIME_BIN            the withruntime binary (default: from PATH); the
#                              agent beside it or in WITHRUNTIME_AGENT
#   WITHRUNTIME_TEMPLATES_DIR  templates holding "base" and "code-interpreter" (default /var/lib/withruntime/templates)
#   WITHRUNTIME_COMPAT_CACHE   where the installed SDKs are kept between runs
#                              (default /var/cache/withruntime/compat-e2b)
# Usage: compat/e2b/run.sh [python|ts]...   (default: both)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${WITHRUNTIME_COMPAT_CACHE:-/var/cache/withruntime/compat-e2b}
bin=${WITHRUNTIME_BIN:-$(command -v withruntime || true)}
templates=${WITHRUNTIME_TEMPLATES_DIR:-/var/lib/withruntime/templates}
suites=("$@")
[[ ${#suites[@]} -gt 0 ]] || suites=(python ts)
log() { echo "compat/e2b: $*" >&2; }
[[ -x $bin ]] || { log "withruntime not found: install it (scripts/install.sh) or set WITHRUNTIME_BIN"; exit 1; }
mkdir -p "$cache"

# Dependencies, installed once per lock file's content.
hash_of() { sha256sum "$@" | sha256sum | cut -c1-16; }
venv=$cache/venv-$(hash_of "$here/python/requirements.lock")
if [[ " ${suites[*]} " == *" python "* && ! -x $venv/.ready ]]; then
	log "installing the Python SDKs into $venv"
	rm -rf "$venv"
	python3 -m venv "$venv"
	"$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$here/python/requirements.lock"
	printf '#!/bin/sh\n' >"$venv/.ready" && chmod +x "$venv/.ready"
fi
stamp=$here/ts/node_modules/.installed-$(hash_of "$here/ts/package-lock.json")
if [[ " ${suites[*]} " == *" ts "* && ! -e $stamp ]]; then
	log "installing the JS SDK (npm ci, cache $cache/npm)"
	(cd "$here/ts" && npm ci --no-audit --no-fund --cache "$cache/npm" >&2)
	touch "$stamp"
fi

# A server of its own: a fresh data directory, free ports.
data=$(mktemp -d /tmp/withruntime-compat-e2b.XXXXXX)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
api=127.0.0.1:$(free_port)
e2b=127.0.0.1:$(free_port)
"$bin" serve --data-dir "$data" --templates-dir "$templates" --no-build --listen "$api" --e2b-listen "$e2b" \
	--pool-size 2 >"$data/server.log" 2>&1 &
server=$!
stop() {
	local rc=$?
	if kill -0 "$server" 2>/dev/null; then
		# Sandboxes outlive their server (the next one adopts them): destroy
		# what the tests left before stopping it.
		for id in $(curl -s -H "Authorization: Bearer $admin" "http://$api/v1/sandboxes" |
			python3 -c 'import json,sys; print(" ".join(s["id"] for s in json.load(sys.stdin)["sandboxes"] if s["state"]!="stopped"))' 2>/dev/null); do
			curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $admin" "http://$api/v1/sandboxes/$id" || true
		done
		kill "$server" && wait "$server" || true
	fi
	[[ $rc -eq 0 ]] || { log "server log:"; tail -n 40 "$data/server.log" >&2; }
	rm -rf --one-file-system "$data"
}
admin=
trap stop EXIT
for _ in $(seq 300); do
	[[ -s $data/local.key ]] && curl -sf "http://$api/v1/health" >/dev/null && break
	kill -0 "$server" 2>/dev/null || { log "withruntime serve exited"; exit 1; }
	sleep 0.1
done
admin=$(cat "$data/local.key")
tenant_key() {
	curl -sf -X POST -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
		-d "{\"name\":\"$1\",\"dailyLimitMicros\":100000000}" "http://$api/v1/keys" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])'
}
key_a=$(tenant_key compat-e2b-a)
key_b=$(tenant_key compat-e2b-b)
export E2B_API_URL=http://$e2b E2B_SANDBOX_URL=http://$e2b E2B_API_KEY=$key_a COMPAT_OTHER_API_KEY=$key_b

for s in "${suites[@]}"; do
	case $s in
	python) (cd "$here/python" && env -u PYTHONPATH "$venv/bin/pytest" -q -p no:cacheprovider tests) ;;
	ts) (cd "$here/ts" && npm test --silent) ;;
	*) log "unknown suite $s (python or ts)"; exit 2 ;;
	esac
done
