#!/usr/bin/env bash
# Runs the Kubernetes suite: the Kubernetes driver and the README's main job
# through `withruntime serve --driver kubernetes`, against a real control
# plane (etcd, kube-apiserver, kube-scheduler started on loopback by the
# tests) with a test double of a node (internal/kube/kubetest/fakenode).
# It builds the control plane first when it is not cached
# (scripts/k8s-bins.sh: minutes the first time, nothing after). Not part of
# scripts/test.sh or CI: the first build is too slow for CI's limit.
#
# Needs root (the server and the node double) and the base template
# (scripts/install.sh --template). Usage: scripts/test-kubernetes.sh [go test flags...]
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
WITHRUNTIME_K8S_BIN=$(scripts/k8s-bins.sh --no-kubelet | tail -1)
export WITHRUNTIME_K8S_BIN
echo "test-kubernetes: binaries in $WITHRUNTIME_K8S_BIN ($((SECONDS - start)) s)" >&2
export WITHRUNTIME_TEMPLATES_DIR=${WITHRUNTIME_TEMPLATES_DIR:-/var/lib/withruntime/templates}
go test -count=1 -timeout 20m -v "$@" \
	./internal/agentauth/ ./internal/kube/... ./internal/driver/kubernetes/ ./test/kubernetes/
