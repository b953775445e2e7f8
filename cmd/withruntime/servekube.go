package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/driver/kubernetes"
)

// addDriverFlags adds serve's --driver and the Kubernetes driver's flags,
// and returns what makes the chosen driver: nil for gvisor (the server's
// default), the Kubernetes driver for "kubernetes".
func addDriverFlags(cmd *cobra.Command) func(ctx context.Context) (driver.Driver, error) {
	var name, kubeconfig, namespace, runtimeClass, agentImage, templateImagePrefix string
	f := cmd.Flags()
	f.StringVar(&name, "driver", "gvisor", "what runs the sandboxes: gvisor (runsc on this host) or kubernetes (a pod each; see README, Kubernetes)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "with --driver kubernetes: kubeconfig file (default: the in-cluster service account)")
	f.StringVar(&namespace, "kubernetes-namespace", "withruntime", "with --driver kubernetes: namespace of the sandboxes' pods (must exist)")
	f.StringVar(&runtimeClass, "kubernetes-runtime-class", "gvisor", "with --driver kubernetes: the pods' runtimeClassName")
	f.StringVar(&agentImage, "kubernetes-agent-image", "", "with --driver kubernetes: image holding the static agent at /withruntime-agent (required)")
	f.StringVar(&templateImagePrefix, "kubernetes-template-image-prefix", "withruntime/template-", "with --driver kubernetes: a template NAME's image is PREFIX+NAME+:latest")
	return func(ctx context.Context) (driver.Driver, error) {
		switch name {
		case "gvisor":
			return nil, nil
		case "kubernetes":
		default:
			return nil, fmt.Errorf("--driver %q: want gvisor or kubernetes", name)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--driver kubernetes: %w (set --kubeconfig, or run in a pod with a service account)", err)
		}
		client, err := k8s.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("--driver kubernetes: %w", err)
		}
		return kubernetes.New(ctx, kubernetes.Config{Client: client, Namespace: namespace, RuntimeClass: runtimeClass,
			AgentImage:    agentImage,
			TemplateImage: func(t string) string { return templateImagePrefix + t + ":latest" }})
	}
}
