#!/usr/bin/env bash
# Runs the Kubernetes suite: the Kubernetes driver, leader election between
# servers (internal/leader), two API replicas on one PostgreSQL surviving
# the leader's death (test/kubernetes, TestReplicasSurviveLeaderKill) and
# the README's main job
# through `withruntime serve --driver kubernetes`, against a real control
# plane (etcd, kube-apiserver, kube-scheduler started on loopback by the
# tests). It builds the control plane first when it is not cached
# (scripts/k8s-bins.sh: minutes the first time, nothing after). Not part of
# scripts/test.sh or CI: the first build is too slow for CI's limit.
#
# The node is a test double (internal/kube/kubetest/fakenode) unless
# --real-node is given: then the main job runs on a real node (kubelet,
# containerd 2, gVisor's containerd-shim-runsc-v1, Debian's CNI bridge, and
# kube-network-policies enforcing NetworkPolicy), and
# the test binary runs in a network namespace of its own (unshare --net),
# so nothing of the node touches the host's network.
#
# Needs root, the base template (scripts/install.sh --template) and
# Debian's postgresql package (the replicas test starts a throwaway cluster).
# Usage: scripts/test-kubernetes.sh [--real-node] [go test flags...]
set -euo pipefail
cd "$(dirname "$0")/.."

real=false
if [[ ${1:-} == --real-node ]]; then
	real=true
	shift
fi
start=$SECONDS
if $real; then
	WITHRUNTIME_K8S_BIN=$(scripts/k8s-bins.sh --node | tail -1)
	# Without CAP_SYS_RESOURCE in the bounding set (bit 24), gVisor's shim
	# cannot lower its OOM score and fails: use the build that does not.
	capbnd=$(awk '/^CapBnd/ { print $2 }' /proc/self/status)
	if ((((16#$capbnd) >> 24 & 1) == 0)); then
		export WITHRUNTIME_K8S_SHIM_DIR=$WITHRUNTIME_K8S_BIN/no-oom-score
		echo "test-kubernetes: no CAP_SYS_RESOURCE here: using gVisor's shim that keeps containerd's OOM score" >&2
	fi
	if [[ ! -x /usr/lib/cni/bridge ]]; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq containernetworking-plugins >&2
	fi
	export WITHRUNTIME_K8S_CONTAINERD_DIR=${WITHRUNTIME_K8S_CONTAINERD_DIR-$WITHRUNTIME_K8S_BIN/containerd2}
else
	WITHRUNTIME_K8S_BIN=$(scripts/k8s-bins.sh --no-kubelet | tail -1)
fi
export WITHRUNTIME_K8S_BIN
echo "test-kubernetes: binaries in $WITHRUNTIME_K8S_BIN ($((SECONDS - start)) s)" >&2
export WITHRUNTIME_TEMPLATES_DIR=${WITHRUNTIME_TEMPLATES_DIR:-/var/lib/withruntime/templates}

if ! $real; then
	go test -count=1 -timeout 20m -v "$@" \
		./internal/agentauth/ ./internal/kube/... ./internal/leader/ ./internal/driver/kubernetes/ ./test/kubernetes/
	exit
fi
# The real node: the test binary (built here, where modules are reachable)
# runs in a new network namespace whose loopback is up; the go tool builds
# what the test itself builds beforehand into its cache.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o /dev/null ./cmd/withruntime ./cmd/withruntime-agent ./internal/kube/kubetest/realnode/pause
go test -c -o "$tmp/kubernetes.test" ./test/kubernetes/
WITHRUNTIME_K8S_NODE=real unshare --net -- sh -c 'ip link set lo up && cd test/kubernetes && exec "$0" -test.count=1 -test.timeout=20m -test.v "$@"' \
	"$tmp/kubernetes.test" "$@"
