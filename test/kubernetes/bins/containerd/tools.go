//go:build tools

// Package tools pins containerd 2 (containerd and ctr) for a real test node
// whose gVisor shim speaks the shim bootstrap protocol of containerd 2
// (scripts/k8s-bins.sh --node). Test-only: never shipped.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
