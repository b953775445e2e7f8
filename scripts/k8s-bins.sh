#!/usr/bin/env bash
# Builds the Kubernetes test control plane from the Go module proxy and caches
# the binaries: etcd (go.etcd.io/etcd/server/v3 through the tiny module
# test/kubernetes/bins/etcd), kube-apiserver, kube-scheduler and kubelet
# (k8s.io/kubernetes through test/kubernetes/bins/kube, whose go.mod requires
# and replaces the staging modules at their published v0.37.2). Test-only: the
# binaries serve the Kubernetes driver's tests (scripts/test-kubernetes.sh).
#
# The binaries land in $WITHRUNTIME_K8S_CACHE (default
# /var/cache/withruntime/k8s)/<key>/bin, where <key> names the versions and a
# hash of the two go.mod/go.sum pairs: a second run finds them and builds
# nothing. It prints that bin directory on stdout (the last line), so
#   export WITHRUNTIME_K8S_BIN=$(scripts/k8s-bins.sh)
# is what the tests want. Builds run under `nice -n 19` (a cold build of all
# of them takes minutes of both cores).
#
# With --node it also builds, for a real node, gVisor's containerd shim
# (containerd-shim-runsc-v1, at the gVisor version of third_party/runsc,
# through test/kubernetes/bins/node), containerd 2, and the NetworkPolicy
# enforcer kube-network-policies (sigs.k8s.io/kube-network-policies v0.8.0,
# through test/kubernetes/bins/netpol); --no-kubelet leaves kubelet out (the
# fake node needs none).
#
# Usage: scripts/k8s-bins.sh [--no-kubelet] [--node]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

KUBE_VERSION=v1.37.2
ETCD_VERSION=v3.7.3
cmds=(kube-apiserver kube-scheduler kubelet)
node=false
for arg in "$@"; do
	case $arg in
	--no-kubelet) cmds=(kube-apiserver kube-scheduler) ;;
	--node) node=true ;;
	*)
		echo "k8s-bins: unknown argument $arg (want --no-kubelet or --node)" >&2
		exit 2
		;;
	esac
done

bins=$root/test/kubernetes/bins
hash=$(cat "$bins"/etcd/go.mod "$bins"/etcd/go.sum "$bins"/etcd/main.go "$bins"/kube/go.mod "$bins"/kube/go.sum |
	sha256sum | cut -c1-12)
cache=${WITHRUNTIME_K8S_CACHE:-/var/cache/withruntime/k8s}/kube-$KUBE_VERSION-etcd-$ETCD_VERSION-$hash
out=$cache/bin
mkdir -p "$out"

export CGO_ENABLED=0 GOFLAGS=-trimpath

# build NAME DIR PKG LDFLAGS: builds one binary into $out unless it is there.
# It builds into a temporary name and renames, so an interrupted build never
# leaves a binary that looks complete.
build() {
	local name=$1 dir=$2 pkg=$3 ldflags=$4 start=$SECONDS
	if [[ -x $out/$name ]]; then
		echo "k8s-bins: $name cached at $out/$name" >&2
		return
	fi
	echo "k8s-bins: building $name ($pkg)..." >&2
	(cd "$dir" && nice -n 19 go build -ldflags "$ldflags" -o "$out/.$name.tmp" "$pkg")
	mv "$out/.$name.tmp" "$out/$name"
	echo "k8s-bins: built $name in $((SECONDS - start)) s ($(du -h "$out/$name" | cut -f1))" >&2
}

build etcd "$bins/etcd" . "-s -w"

# The version ldflags of kubernetes' hack/lib/version.sh: without them the
# binaries say v0.0.0 and clients that check the server version complain.
major=${KUBE_VERSION#v}
major=${major%%.*}
minor=${KUBE_VERSION#v*.}
minor=${minor%%.*}
kv="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
	kv+=" -X '$pkg.gitVersion=$KUBE_VERSION' -X '$pkg.gitMajor=$major' -X '$pkg.gitMinor=$minor'"
	kv+=" -X '$pkg.gitTreeState=clean' -X '$pkg.buildDate=1970-01-01T00:00:00Z'"
done
for c in "${cmds[@]}"; do
	build "$c" "$bins/kube" "k8s.io/kubernetes/cmd/$c" "$kv"
done
if $node; then
	pin=$(awk '$1 == "require" && $2 == "gvisor.dev/gvisor" { print $3 }' "$bins/node/go.mod")
	shimflags="-s -w -X gvisor.dev/gvisor/runsc/version.version=$pin"
	build containerd-shim-runsc-v1 "$bins/node" gvisor.dev/gvisor/shim "$shimflags"
	# The NetworkPolicy enforcer of the real node
	# (sigs.k8s.io/kube-network-policies through test/kubernetes/bins/netpol),
	# in a directory keyed by its own sources' hash (so changing it rebuilds
	# it alone), linked as $out/kube-network-policies. Built from a vendored
	# copy whose nftables rules end in iptables' NFQUEUE target (through
	# nft_compat) instead of nftables' queue expression, which this host's
	# kernel lacks (bins/netpol/xtqueue.go.in says more). Test-only.
	np=$bins/netpol
	nphash=$(cat "$np"/go.mod "$np"/go.sum "$np"/main.go "$np"/xtqueue.go.in "$root/scripts/k8s-bins.sh" | sha256sum | cut -c1-12)
	npdir=$out/netpol-$nphash
	if [[ ! -x $npdir/kube-network-policies ]]; then
		(
			tmp=$(mktemp -d)
			trap 'rm -rf "$tmp"' EXIT
			cp "$np/go.mod" "$np/go.sum" "$np/main.go" "$tmp/"
			cd "$tmp"
			go mod vendor
			pkg=vendor/sigs.k8s.io/kube-network-policies/pkg/networkpolicy
			cp "$np/xtqueue.go.in" "$pkg/xtqueue.go"
			perl -0pi -e 's/queue := &expr\.Queue\{Num: uint16\(c\.config\.QueueID\)\}\n\tif c\.config\.FailOpen \{\n\t\tqueue\.Flag = expr\.QueueFlagBypass\n\t\}/queue := xtQueue(uint16(c.config.QueueID), c.config.FailOpen)/g' "$pkg/controller.go"
			if [[ $(grep -c 'queue := xtQueue(' "$pkg/controller.go") != 2 ]] || grep -q 'expr\.Queue{' "$pkg/controller.go"; then
				echo "k8s-bins: kube-network-policies no longer makes its queue verdict as this patch expects; update it" >&2
				exit 1
			fi
			# Upstream bug: without NRI (off here: its socket is a host
			# path) the packet of a pod to an address no pod has looks the
			# address up in the nil NRI plugin and the enforcer panics.
			perl -0pi -e 's/(func \(p \*nriPlugin\) GetPodFromIP\(ip string\) string \{\n)/$1\tif p == nil {\n\t\treturn ""\n\t}\n/' "$pkg/nri.go"
			grep -q 'if p == nil {' "$pkg/nri.go" || {
				echo "k8s-bins: kube-network-policies' nriPlugin.GetPodFromIP changed; update this patch" >&2
				exit 1
			}
			mkdir -p "$npdir"
			start=$SECONDS
			nice -n 19 go build -mod=vendor -ldflags "-s -w" -o "$npdir/.kube-network-policies.tmp" .
			mv "$npdir/.kube-network-policies.tmp" "$npdir/kube-network-policies"
			echo "k8s-bins: built kube-network-policies in $((SECONDS - start)) s ($(du -h "$npdir/kube-network-policies" | cut -f1))" >&2
		)
	fi
	ln -sfn "netpol-$nphash/kube-network-policies" "$out/kube-network-policies"
	# containerd 2 and ctr: today's gVisor shim answers containerd's start
	# with the bootstrap protocol of containerd 2, which Debian 12's 1.6
	# cannot read.
	if [[ ! -x $out/containerd2/containerd || ! -x $out/containerd2/ctr ]]; then
		mkdir -p "$out/containerd2"
		start=$SECONDS
		(cd "$bins/containerd" && nice -n 19 go build -tags 'no_btrfs no_devmapper no_zfs no_aufs' -ldflags "-s -w" \
			-o "$out/containerd2/" github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/ctr)
		echo "k8s-bins: built containerd 2 and ctr in $((SECONDS - start)) s" >&2
	fi
	# The same shim for a test host without CAP_SYS_RESOURCE (a container
	# whose bounding set lacks it): upstream lowers the shim's own
	# oom_score_adj to -999 and fails without that capability; this one
	# leaves it at containerd's. Built from a vendored copy of the module
	# (in a temporary directory) with that one constant changed. Test-only.
	if [[ ! -x $out/no-oom-score/containerd-shim-runsc-v1 ]]; then
		(
			tmp=$(mktemp -d)
			trap 'rm -rf "$tmp"' EXIT
			cp "$bins/node/go.mod" "$bins/node/go.sum" "$bins/node/tools.go" "$tmp/"
			cd "$tmp"
			go mod vendor
			f=vendor/gvisor.dev/gvisor/pkg/shim/v1/manager.go
			sed -i 's/^\toomScoreMax = -999$/\toomScoreMax = 0/' "$f"
			grep -q '^.oomScoreMax = 0$' "$f" || {
				echo "k8s-bins: gVisor's shim no longer has oomScoreMax = -999; update this patch" >&2
				exit 1
			}
			mkdir -p "$out/no-oom-score"
			start=$SECONDS
			nice -n 19 go build -mod=vendor -ldflags "$shimflags" -o "$out/no-oom-score/.shim.tmp" gvisor.dev/gvisor/shim
			mv "$out/no-oom-score/.shim.tmp" "$out/no-oom-score/containerd-shim-runsc-v1"
			echo "k8s-bins: built containerd-shim-runsc-v1 without the OOM score in $((SECONDS - start)) s" >&2
		)
	fi
fi
echo "$out"
