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
# Each server gets a templates directory of its own (links to the templates
# above), so the suite's Template.build writes nowhere else. The template
# tests build from a small image (made from the base template's files by
# compat/e2b/imagereg, which needs Go) that a registry on a loopback port of
# the run's own serves; its reference is COMPAT_IMAGE.
# The domain suites (python-domain, ts-domain) run the SDKs with E2B_DOMAIN
# alone against a second server started with --e2b-domain and TLS (a CA
# made for the run), its names resolved to a loopback address of the run's
# own by compat/e2b/dns.py, which the tests see through a private mount
# of /etc/resolv.conf (unshare): nothing leaves the host. Needs openssl
# and unshare.
# Usage: compat/e2b/run.sh [python|ts|python-domain|ts-domain]...   (default: all four)
# upstream-py-sync, upstream-py-async, upstream-py-shared, upstream-ci-py,
# upstream-js and upstream-ci-js run E2B's own suites (compat/e2b/upstream.sh
# says from where); each with -domain after its name (upstream-js-domain...)
# runs it in domain mode, as the domain suites run.
# COMPAT_ONLY=PATTERN runs only the tests whose names match (pytest -k, node
# --test-name-pattern), for a narrow run while working on one feature.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${WITHRUNTIME_COMPAT_CACHE:-/var/cache/withruntime/compat-e2b}
bin=${WITHRUNTIME_BIN:-$(command -v withruntime || true)}
templates=${WITHRUNTIME_TEMPLATES_DIR:-/var/lib/withruntime/templates}
suites=("$@")
[[ ${#suites[@]} -gt 0 ]] || suites=(python ts python-domain ts-domain)
log() { echo "compat/e2b: $*" >&2; }
[[ -x $bin ]] || { log "withruntime not found: install it (scripts/install.sh) or set WITHRUNTIME_BIN"; exit 1; }
mkdir -p "$cache"

# Dependencies, installed once per lock file's content.
hash_of() { sha256sum "$@" | sha256sum | cut -c1-16; }
venv=$cache/venv-$(hash_of "$here/python/requirements.lock")
if [[ " ${suites[*]} " == *" python"* || " ${suites[*]} " == *" upstream-"* ]] && [[ ! -x $venv/.ready ]]; then
	log "installing the Python SDKs into $venv"
	rm -rf "$venv"
	python3 -m venv "$venv"
	"$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$here/python/requirements.lock"
	printf '#!/bin/sh\n' >"$venv/.ready" && chmod +x "$venv/.ready"
fi
stamp=$here/ts/node_modules/.installed-$(hash_of "$here/ts/package-lock.json")
if [[ " ${suites[*]} " == *" ts"* && ! -e $stamp ]]; then
	log "installing the JS SDK (npm ci, cache $cache/npm)"
	(cd "$here/ts" && npm ci --no-audit --no-fund --cache "$cache/npm" >&2)
	touch "$stamp"
fi

# A server of its own: a fresh data directory, free ports.
data=$(mktemp -d /tmp/withruntime-compat-e2b.XXXXXX)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# own_templates DIR: DIR/templates, links to the templates (builds write there).
own_templates() {
	mkdir -p "$1/templates"
	for t in "$templates"/*/; do
		t=${t%/}
		ln -s "$t" "$1/templates/$(basename "$t")"
	done
}
api=127.0.0.1:$(free_port)
e2b=127.0.0.1:$(free_port)
own_templates "$data"
"$bin" serve --data-dir "$data" --templates-dir "$data/templates" --no-build --listen "$api" --e2b-listen "$e2b" \
	--pool-size 2 >"$data/server.log" 2>&1 &
server=$!
# destroy_all DATA API: destroy what a server's tests left running.
# Sandboxes outlive their server (the next one adopts them).
destroy_all() {
	local key
	key=$(cat "$1/local.key" 2>/dev/null) || return 0
	for id in $(curl -s -H "Authorization: Bearer $key" "http://$2/v1/sandboxes" |
		python3 -c 'import json,sys; print(" ".join(s["id"] for s in json.load(sys.stdin)["sandboxes"] if s["state"]!="stopped"))' 2>/dev/null); do
		curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $key" "http://$2/v1/sandboxes/$id" || true
	done
}
dserver= dns= ddata= imagereg=
stop() {
	local rc=$?
	if kill -0 "$server" 2>/dev/null; then
		destroy_all "$data" "$api"
		kill "$server" && wait "$server" || true
	fi
	if [[ -n $dserver ]] && kill -0 "$dserver" 2>/dev/null; then
		destroy_all "$ddata" "$dapi"
		kill "$dserver" && wait "$dserver" || true
	fi
	[[ -z $dns ]] || kill "$dns" 2>/dev/null || true
	[[ -z $imagereg ]] || kill "$imagereg" 2>/dev/null || true
	if [[ $rc -ne 0 ]]; then
		log "server log:"; tail -n 40 "$data/server.log" >&2
		[[ -z $ddata ]] || { log "domain server log:"; tail -n 40 "$ddata/server.log" >&2; }
	fi
	for d in "$data" $ddata; do
		# A server that died before destroy_all leaves its sandboxes'
		# socket mounts (a tmpfs and the read-only host directory in it).
		awk -v d="$d/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r | xargs -r umount -l 2>/dev/null || true
		rm -rf --one-file-system "$d"
	done
}
trap stop EXIT
# wait_up DATA API PID: until the server answers.
wait_up() {
	for _ in $(seq 300); do
		[[ -s $1/local.key ]] && curl -sf "http://$2/v1/health" >/dev/null && return 0
		kill -0 "$3" 2>/dev/null || { log "withruntime serve exited"; return 1; }
		sleep 0.1
	done
	log "withruntime serve did not answer on $2"; return 1
}
# tenant_key DATA API NAME: a new key with a daily limit.
tenant_key() {
	curl -sf -X POST -H "Authorization: Bearer $(cat "$1/local.key")" -H 'Content-Type: application/json' \
		-d "{\"name\":\"$3\",\"dailyLimitMicros\":100000000}" "http://$2/v1/keys" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])'
}
wait_up "$data" "$api" "$server"
key_a=$(tenant_key "$data" "$api" compat-e2b-a)
key_b=$(tenant_key "$data" "$api" compat-e2b-b)

# The image the template tests build from, in a registry on loopback.
if [[ " ${suites[*]} " == *" python "* || " ${suites[*]} " == *" ts "* ]]; then
	if (cd "$here/../.." && go build -o "$data/imagereg" ./compat/e2b/imagereg) >&2; then
		"$data/imagereg" -rootfs "$templates/base/rootfs" >"$data/image.ref" 2>"$data/imagereg.log" &
		imagereg=$!
		for _ in $(seq 300); do
			[[ -s $data/image.ref ]] && break
			kill -0 "$imagereg" 2>/dev/null || break
			sleep 0.1
		done
		COMPAT_IMAGE=$(head -n 1 "$data/image.ref" 2>/dev/null || true)
		[[ -n $COMPAT_IMAGE ]] || { log "imagereg did not start:"; cat "$data/imagereg.log" >&2; }
		export COMPAT_IMAGE
	else
		log "cannot build compat/e2b/imagereg (Go is needed): the template tests that build from an image are skipped"
	fi
fi

# The domain mode's server: TLS for api.DOMAIN and *.DOMAIN on port 443 of
# a loopback address of its own, named by dns.py.
start_domain() {
	[[ -z $dserver ]] || return 0
	ddata=$(mktemp -d /tmp/withruntime-compat-e2b-domain.XXXXXX)
	domain=e2b-compat.test
	daddr=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
	dapi=127.0.0.1:$(free_port)
	local tls=$ddata/tls
	mkdir -p "$tls"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "/CN=compat-e2b test CA" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
		-keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=*.$domain" \
		-keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
	printf 'subjectAltName=DNS:*.%s,DNS:api.%s\nextendedKeyUsage=serverAuth\n' "$domain" "$domain" >"$tls/ext"
	openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial -days 2 \
		-extfile "$tls/ext" -out "$tls/server.pem" 2>/dev/null
	cat /etc/ssl/certs/ca-certificates.crt "$tls/ca.pem" >"$tls/bundle.pem" 2>/dev/null || cp "$tls/ca.pem" "$tls/bundle.pem"
	printf 'nameserver %s\noptions timeout:1 attempts:2\n' "$daddr" >"$ddata/resolv.conf"
	python3 "$here/dns.py" "$daddr" "$domain" >"$ddata/dns.log" 2>&1 &
	dns=$!
	own_templates "$ddata"
	"$bin" serve --data-dir "$ddata" --templates-dir "$ddata/templates" --no-build --listen "$dapi" --e2b-listen "$daddr:443" \
		--e2b-domain "$domain" --e2b-tls-cert "$tls/server.pem" --e2b-tls-key "$tls/server.key" \
		--pool-size 0 >"$ddata/server.log" 2>&1 &
	dserver=$!
	wait_up "$ddata" "$dapi" "$dserver"
	dkey=$(tenant_key "$ddata" "$dapi" compat-e2b-domain)
}
# in_domain CMD...: CMD with only E2B_DOMAIN and E2B_API_KEY set, the CA
# trusted, and /etc/resolv.conf naming dns.py (in a mount namespace of its
# own: the host's file is untouched).
in_domain() {
	env -u E2B_API_URL -u E2B_SANDBOX_URL -u COMPAT_OTHER_API_KEY -u COMPAT_IMAGE -u PYTHONPATH \
		E2B_DOMAIN=$domain E2B_API_KEY=$dkey SSL_CERT_FILE=$ddata/tls/bundle.pem NODE_EXTRA_CA_CERTS=$ddata/tls/ca.pem \
		unshare --mount --propagation private -- sh -c 'mount --bind "$0" /etc/resolv.conf && exec "$@"' "$ddata/resolv.conf" "$@"
}

export E2B_API_URL=http://$e2b E2B_SANDBOX_URL=http://$e2b E2B_API_KEY=$key_a COMPAT_OTHER_API_KEY=$key_b
for s in "${suites[@]}"; do
	case $s in
	python) (cd "$here/python" && env -u PYTHONPATH "$venv/bin/pytest" -q -p no:cacheprovider ${COMPAT_ONLY:+-k "$COMPAT_ONLY"} tests) ;;
	ts) (cd "$here/ts" && if [[ -n ${COMPAT_ONLY:-} ]]; then node --test --test-concurrency=1 --test-name-pattern="$COMPAT_ONLY" test/; else npm test --silent; fi) ;;
	upstream-*-domain)
		UPSTREAM_PREPARE_ONLY=1 "$here/upstream.sh" "$venv" "${s%-domain}"
		start_domain
		in_domain "$here/upstream.sh" "$venv" "${s%-domain}"
		;;
	upstream-*) "$here/upstream.sh" "$venv" "$s" ;;
	python-domain) start_domain; (cd "$here/python" && in_domain "$venv/bin/pytest" -q -p no:cacheprovider domain) ;;
	ts-domain) start_domain; (cd "$here/ts" && in_domain node --test --test-concurrency=1 domain/) ;;
	*) log "unknown suite $s (python, ts, python-domain or ts-domain)"; exit 2 ;;
	esac
done
