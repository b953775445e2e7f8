//go:build tools

// Package tools pins sigs.k8s.io/kube-network-policies, the NetworkPolicy
// enforcer (nftables + nfqueue) of the real test node: scripts/k8s-bins.sh
// --node builds its command (sigs.k8s.io/kube-network-policies/cmd, a main
// package, so the packages it imports are listed here to keep their
// dependencies in go.sum). Test-only: the production driver only writes
// NetworkPolicy objects and never ships this.
package tools

import (
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-helpers/node/util"
	_ "sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
	_ "sigs.k8s.io/network-policy-api/pkg/client/informers/externalversions"
)
