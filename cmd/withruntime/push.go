package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"

	"withruntime.dev/runtime/internal/template"
	"withruntime.dev/runtime/internal/template/registry"
)

// newTemplatePushCmd is `template push NAME --image REF`.
//
// The agent's image is pushed by `template push-agent`, beside it rather
// than under a group of its own: it is the other image a Kubernetes
// deployment pulls, pushed to the same registry at the same time as the
// templates, and a top-level group for one command would hide it.
func newTemplatePushCmd() *cobra.Command {
	var ref, dir string
	cmd := &cobra.Command{
		Use:   "push NAME --image REGISTRY/REPO[:TAG]",
		Short: "Push a built template to a registry as an OCI image (for serve --driver kubernetes)",
		Long: `Push the template NAME, built on this host, to a container registry as a linux/amd64 OCI image:
one layer holding its root filesystem (owners, modes, symlinks, hard links and file capabilities
kept; device nodes left out), and a config with its environment, WorkingDir /workspace, User user
and its template.json in the labels ` + registry.LabelTemplate + ` and ` + registry.LabelInfo + `.
The same template always gives the same digest. Credentials come from the docker config
(~/.docker/config.json or $DOCKER_CONFIG, with its credential helpers); loopback and private
addresses are spoken to over plain HTTP.

A server with --driver kubernetes finds template NAME at
--kubernetes-template-image-prefix + NAME + ":latest", so push to that, e.g.
  withruntime template push base --image registry.example/withruntime-template-base
Run it as root (a template's files are root's). It prints the image pinned by digest.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ref == "" {
				return fmt.Errorf("--image is required: where to push, e.g. registry.example/withruntime-template-%s", args[0])
			}
			if dir == "" {
				dir = filepath.Join(dataDir(), "templates")
			}
			if err := template.ValidName(args[0]); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "withruntime: pushing template %s (from %s) to %s\n", args[0], dir, ref)
			p, err := registry.Push(cmd.Context(), &template.Store{Dir: dir}, args[0], ref, registry.Options{})
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "withruntime: pushed %s (%s)\n", p.Tag, p.Digest)
			fmt.Println(p.Ref)
			return nil
		},
	}
	cmd.Flags().StringVar(&ref, "image", "", "where to push: REGISTRY/REPO[:TAG] (default tag latest)")
	cmd.Flags().StringVar(&dir, "templates-dir", os.Getenv("WITHRUNTIME_TEMPLATES_DIR"), "the directory of templates (default DATA_DIR/templates)")
	return cmd
}

// newTemplatePushAgentCmd is `template push-agent --image REF`.
func newTemplatePushAgentCmd() *cobra.Command {
	var ref, agent string
	cmd := &cobra.Command{
		Use:   "push-agent --image REGISTRY/REPO[:TAG]",
		Short: "Push the sandbox agent's image to a registry (for serve --driver kubernetes)",
		Long: `Push the static withruntime-agent binary as an OCI image holding it alone at
` + registry.AgentPath + `: the image --kubernetes-agent-image names, from which each pod's init
container copies the agent. The same binary always gives the same digest. Give the server the
printed reference, pinned by digest, so that a later push changes no running sandbox:
  withruntime serve --driver kubernetes --kubernetes-agent-image "$(withruntime template push-agent --image registry.example/withruntime-agent)"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ref == "" {
				return fmt.Errorf("--image is required: where to push, e.g. registry.example/withruntime-agent:VERSION")
			}
			if agent == "" {
				var err error
				if agent, err = findAgent(); err != nil {
					return err
				}
			}
			fmt.Fprintf(os.Stderr, "withruntime: pushing the agent %s to %s\n", agent, ref)
			p, err := registry.PushAgent(cmd.Context(), agent, ref, registry.Options{})
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "withruntime: pushed %s (%s)\n", p.Tag, p.Digest)
			fmt.Println(p.Ref)
			return nil
		},
	}
	cmd.Flags().StringVar(&ref, "image", "", "where to push: REGISTRY/REPO[:TAG] (default tag latest)")
	cmd.Flags().StringVar(&agent, "agent", "", "the static agent binary (default: $WITHRUNTIME_AGENT, then withruntime-agent beside this executable, then on PATH)")
	return cmd
}

// findAgent finds the agent binary as serve does.
func findAgent() (string, error) {
	if p := os.Getenv("WITHRUNTIME_AGENT"); p != "" {
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "withruntime-agent")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("withruntime-agent"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("withruntime-agent not found: give --agent PATH or set WITHRUNTIME_AGENT")
}
