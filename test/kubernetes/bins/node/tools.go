//go:build tools

// Package tools pins gVisor's containerd shim (containerd-shim-runsc-v1), at
// the gVisor version of third_party/runsc, for a real Kubernetes node
// (scripts/k8s-bins.sh --node). Test-only: never shipped.
package tools

import _ "gvisor.dev/gvisor/shim"
