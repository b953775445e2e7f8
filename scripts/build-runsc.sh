#!/usr/bin/env bash
# Builds runsc from the gVisor version pinned in third_party/runsc (never
# downloads a binary) and prints the path of the built binary on stdout.
#
# The result is cached under ${WITHRUNTIME_CACHE:-/var/cache/withruntime}/runsc/<key>/runsc
# where <key> is the sha256 of third_party/runsc/go.mod, go.sum, `go version`
# and the build flags, so a rebuild happens only when the pin or the toolchain changes.
# Progress goes to stderr; stdout carries only the final path.
set -euo pipefail

cd "$(dirname "$0")/.."
repo=$(pwd)
mod="$repo/third_party/runsc"

log() { printf 'build-runsc: %s\n' "$*" >&2; }

if ! command -v go >/dev/null 2>&1; then
	log "error: the Go toolchain (go) is not on PATH"
	exit 1
fi
for f in go.mod go.sum tools.go; do
	if [[ ! -f "$mod/$f" ]]; then
		log "error: $mod/$f is missing"
		exit 1
	fi
done

pin=$(awk '$1 == "require" && $2 == "gvisor.dev/gvisor" { print $3 }' "$mod/go.mod")
if [[ -z $pin ]]; then
	log "error: $mod/go.mod does not require gvisor.dev/gvisor"
	exit 1
fi
# `runsc --version` reports the pinned gVisor version.
ldflags="-X gvisor.dev/gvisor/runsc/version.version=$pin"

cache="${WITHRUNTIME_CACHE:-/var/cache/withruntime}"
key=$({ cat "$mod/go.mod" "$mod/go.sum"; (cd "$mod" && go version); echo "$ldflags"; } | sha256sum | cut -c1-64)
dir="$cache/runsc/$key"
out="$dir/runsc"

if [[ -x "$out" ]]; then
	log "cached: $out"
	printf '%s\n' "$out"
	exit 0
fi

log "building runsc (gvisor.dev/gvisor $pin) with $(cd "$mod" && go version | awk '{print $3}'); this takes a few minutes"

mkdir -p "$dir"
tmp=$(mktemp "$dir/.runsc.XXXXXX")
trap 'rm -f "$tmp"' EXIT

start=$SECONDS
(
	cd "$mod"
	CGO_ENABLED=0 go build -trimpath -tags tools -ldflags "$ldflags" -o "$tmp" gvisor.dev/gvisor/runsc
) >&2
chmod 0755 "$tmp"
# Sanity check: the binary must run.
if ! "$tmp" --version >/dev/null 2>&1; then
	log "error: the built runsc does not run (\`runsc --version\` failed)"
	exit 1
fi
mv -f "$tmp" "$out"
trap - EXIT
log "built in $((SECONDS - start))s: $out"
printf '%s\n' "$out"
