// Command etcd is etcd's own server main (go.etcd.io/etcd/server/v3/etcdmain),
// built from the Go module proxy for the Kubernetes test control plane
// (scripts/k8s-bins.sh). Test-only: never shipped.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
