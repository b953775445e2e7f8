//go:build tools

// Package tools pins the Kubernetes commands that scripts/k8s-bins.sh builds
// (kube-apiserver, kube-scheduler, kubelet) so that `go mod tidy` keeps their
// dependencies in go.sum. Test-only: never shipped.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/cmd/kubelet/app"
)
