package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"withruntime.dev/runtime/internal/leader"
)

// addLeaderFlags adds serve's --leader-election flags and returns what
// makes the elector: nil without --leader-election. It reaches the API
// server as the Kubernetes driver does (--kubeconfig, else the pod's
// service account), and keeps the Lease in --kubernetes-server-namespace
// unless told otherwise.
func addLeaderFlags(cmd *cobra.Command) func(log *slog.Logger) (leader.Elector, error) {
	var on bool
	var name, namespace, identity string
	var lease, renew, retry time.Duration
	f := cmd.Flags()
	f.BoolVar(&on, "leader-election", false, "run as one of several servers sharing a store: only the leader (elected through a Kubernetes Lease) ends leases and paused retentions, keeps the warm pool and runs the metering sampler; every server serves the API (see README, Kubernetes)")
	f.StringVar(&name, "leader-election-lease", "withruntime-server", "with --leader-election: name of the coordination.k8s.io Lease (created if missing)")
	f.StringVar(&namespace, "leader-election-namespace", "", "with --leader-election: namespace of the Lease (default: --kubernetes-server-namespace); the server's identity needs get, create and update on leases there")
	f.StringVar(&identity, "leader-election-identity", "", "with --leader-election: this server's identity in the Lease, unique among the servers (default: the host name, in Kubernetes the pod's name)")
	f.DurationVar(&lease, "leader-election-lease-duration", leader.DefaultLeaseDuration, "with --leader-election: how long (whole seconds) the other servers wait after the leader's last renewal before one of them takes over")
	f.DurationVar(&renew, "leader-election-renew-deadline", leader.DefaultRenewDeadline, "with --leader-election: how long the leader tries to renew before it stops its leader-only work; lease duration - renew deadline - retry period is the time it has to stop before another may start")
	f.DurationVar(&retry, "leader-election-retry-period", leader.DefaultRetryPeriod, "with --leader-election: time between two tries to renew or take the Lease")
	return func(log *slog.Logger) (leader.Elector, error) {
		if !on {
			for _, n := range []string{"leader-election-lease", "leader-election-namespace", "leader-election-identity",
				"leader-election-lease-duration", "leader-election-renew-deadline", "leader-election-retry-period"} {
				if f.Changed(n) {
					return nil, fmt.Errorf("--%s is for leader election: add --leader-election", n)
				}
			}
			return nil, nil
		}
		if err := leader.CheckTimings(lease, renew, retry); err != nil {
			return nil, fmt.Errorf("--leader-election-lease-duration, -renew-deadline, -retry-period: %w", err)
		}
		if namespace == "" {
			namespace, _ = f.GetString("kubernetes-server-namespace")
		}
		if identity == "" {
			h, err := os.Hostname()
			if err != nil || h == "" {
				return nil, fmt.Errorf("--leader-election: no host name to use as identity (%v): give --leader-election-identity", err)
			}
			identity = h
		}
		kubeconfig, _ := f.GetString("kubeconfig")
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--leader-election: %w (set --kubeconfig, or run in a pod with a service account)", err)
		}
		client, err := k8s.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("--leader-election: %w", err)
		}
		el, err := leader.New(leader.Config{Client: client, Namespace: namespace, Name: name, Identity: identity,
			LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry, Log: log})
		if err != nil {
			return nil, fmt.Errorf("--leader-election: %w", err)
		}
		log.Info("leader election", "lease", namespace+"/"+name, "identity", identity,
			"leaseDuration", lease, "renewDeadline", renew, "retryPeriod", retry, "stopMargin", el.StopMargin())
		return el, nil
	}
}
