// Command kube-network-policies is sigs.k8s.io/kube-network-policies' NetworkPolicy
// enforcer (nftables on the POSTROUTING hook + nfqueue: the first packet of
// each connection of a pod some policy selects is judged in user space)
// for the real test node of internal/kube/kubetest/realnode. Test-only:
// the production driver only writes NetworkPolicy objects and never ships
// this.
//
// It is the upstream command (cmd/main.go at v0.8.0) cut to what the test
// node needs, with one change: upstream reads only the in-cluster service
// account (fixed paths under /var/run/secrets, which a test must not write
// on its host), this reads -kubeconfig. NRI is off (its socket is a fixed
// host path too): pod IPs come from the API server.
//
// Usage: kube-network-policies -kubeconfig FILE -hostname-override NODE [-nfqueue-id N]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file of the API server (required)")
	node := flag.String("hostname-override", "", "the node's name (required)")
	queueID := flag.Int("nfqueue-id", 100, "number of the nfqueue used")
	klog.InitFlags(nil)
	flag.Parse()
	if *kubeconfig == "" || *node == "" {
		fmt.Fprintln(os.Stderr, "kube-network-policies: -kubeconfig and -hostname-override are required")
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, unix.SIGTERM)
	defer cancel()
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatalf("kubeconfig %s: %v", *kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		klog.Fatalf("client: %v", err)
	}
	f := informers.NewSharedInformerFactory(client, 0)
	c, err := networkpolicy.NewController(client, f.Networking().V1().NetworkPolicies(), f.Core().V1().Namespaces(),
		f.Core().V1().Pods(), nil, nil, nil, nil, networkpolicy.Config{
			QueueID: *queueID, NodeName: *node, NetfilterBug1766Fix: true, NRIdisabled: true,
		})
	if err != nil {
		klog.Fatalf("network policy controller: %v", err)
	}
	go func() {
		if err := c.Run(ctx); err != nil {
			klog.Errorf("network policy controller: %v", err)
			cancel()
		}
	}()
	f.Start(ctx.Done())
	<-ctx.Done()
	// Upstream waits too: the controller removes its nftables table.
	time.Sleep(2 * time.Second)
}
