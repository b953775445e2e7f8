package fakenode

import "github.com/virtual-kubelet/virtual-kubelet/errdefs"

func errNotFound(ns, name string) error {
	return errdefs.NotFoundf("pod %s/%s not on the fake node", ns, name)
}
