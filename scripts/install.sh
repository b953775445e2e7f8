#!/usr/bin/env bash
# Installs what Runtime needs on this host, as root. Idempotent and fast when
# everything is already in place:
#
#   - Debian packages: mmdebstrap (builds templates), iproute2 and nftables
#     (sandbox networking), bubblewrap, postgresql (the store's tests start
#     throwaway clusters of it; a server needs it only for serve --store
#     postgres://..., and then usually on another host; no main cluster is
#     made or started here)
#   - runsc, built from the gVisor version pinned in third_party/runsc
#     (scripts/build-runsc.sh; never a downloaded binary) -> /usr/local/bin/runsc
#   - withruntime and withruntime-agent -> /usr/local/bin
#   - kernel.pid_max raised where it would cap sandboxes before memory does
#
# Usage: scripts/install.sh [--template]
#   --template  also build the base template if it is missing (a few minutes)
set -euo pipefail

usage() {
	sed -n '2,16s/^# \{0,1\}//p' "$0" >&2
}

want_template=0
for arg in "$@"; do
	case "$arg" in
	--template) want_template=1 ;;
	-h | --help)
		usage
		exit 0
		;;
	*)
		echo "install: unknown argument: $arg" >&2
		usage
		exit 2
		;;
	esac
done

log() { printf 'install: %s\n' "$*" >&2; }
die() {
	printf 'install: error: %s\n' "$*" >&2
	exit 1
}

if [[ $(id -u) -ne 0 ]]; then
	die "must run as root (Runtime needs root for gVisor, networking and templates); try: sudo $0 $*"
fi

cd "$(dirname "$0")/.."

# --- Debian packages -------------------------------------------------------
# maven fetches the code interpreter's Java kernel jars (pinned) when its
# template is built.
packages=(mmdebstrap iproute2 nftables bubblewrap postgresql maven curl)
missing=()
for p in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
	if [[ $status != ii* ]]; then
		missing+=("$p")
	fi
done
if ((${#missing[@]} > 0)); then
	log "installing packages: ${missing[*]}"
	# Debian's postgresql would make and start a "main" cluster on port 5432;
	# Runtime's tests start their own on unix sockets, so none is made.
	if [[ " ${missing[*]} " == *" postgresql "* && ! -e /etc/postgresql-common/createcluster.d/withruntime.conf ]]; then
		mkdir -p /etc/postgresql-common/createcluster.d
		echo 'create_main_cluster = false' >/etc/postgresql-common/createcluster.d/withruntime.conf
	fi
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
else
	log "packages: ok (${packages[*]})"
fi

# --- Go toolchain ----------------------------------------------------------
command -v go >/dev/null 2>&1 || die "the Go toolchain (go) is not on PATH; it is needed to build runsc and withruntime"

# --- runsc -----------------------------------------------------------------
runsc=$(scripts/build-runsc.sh)
[[ -x $runsc ]] || die "scripts/build-runsc.sh did not produce a binary"
if cmp -s "$runsc" /usr/local/bin/runsc; then
	log "runsc: ok (/usr/local/bin/runsc)"
else
	install -m 0755 "$runsc" /usr/local/bin/runsc.new
	mv -f /usr/local/bin/runsc.new /usr/local/bin/runsc
	log "runsc: installed /usr/local/bin/runsc"
fi

# --- withruntime -----------------------------------------------------------
# go build's cache makes this quick when nothing changed. Build to a
# temporary name and rename, so a running binary is never half-written.
# The git commit goes into the binaries (withruntime version, GET /v1/health).
ldflags=()
if commit=$(git rev-parse HEAD 2>/dev/null); then
	pkg=withruntime.dev/runtime/internal/version
	modified=false
	[[ -z $(git status --porcelain --untracked-files=no 2>/dev/null) ]] || modified=true
	ldflags=(-ldflags "-X $pkg.Commit=$commit -X $pkg.CommitTime=$(TZ=UTC git show -s --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD) -X $pkg.Modified=$modified")
fi
for cmd in withruntime withruntime-agent; do
	log "building $cmd"
	CGO_ENABLED=0 go build "${ldflags[@]}" -o "/usr/local/bin/.$cmd.new" "./cmd/$cmd"
	if cmp -s "/usr/local/bin/.$cmd.new" "/usr/local/bin/$cmd"; then
		rm -f "/usr/local/bin/.$cmd.new"
	else
		mv -f "/usr/local/bin/.$cmd.new" "/usr/local/bin/$cmd"
		log "$cmd: installed /usr/local/bin/$cmd"
	fi
done

# --- kernel.pid_max ---------------------------------------------------------
# Each idle sandbox holds about 31 host threads and 20 MiB of host memory
# (bench/suite). Where pid_max would run out before memory does, raise it,
# so the host's capacity is its memory's; persisted in /etc/sysctl.d.
pid_max=$(cat /proc/sys/kernel/pid_max)
mem_kib=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
by_memory=$((mem_kib / (20 * 1024)))
by_pids=$((pid_max / 31))
if ((by_pids < by_memory)); then
	want=4194304
	log "kernel.pid_max $pid_max allows about $by_pids sandboxes, memory about $by_memory: raising it to $want (/etc/sysctl.d/90-withruntime.conf)"
	echo "kernel.pid_max = $want" >/etc/sysctl.d/90-withruntime.conf
	sysctl -q -w kernel.pid_max=$want || log "warning: could not raise kernel.pid_max (a container without sysctl rights?); cap sandboxes with serve --max-sandboxes"
fi

# --- base template (optional) ----------------------------------------------
if ((want_template)); then
	# Builds base only when it is missing or was built from another version
	# of its recipe (an older withruntime's); otherwise returns at once.
	/usr/local/bin/withruntime template build base --missing >&2
	log "template base: ok"
fi

log "done"
