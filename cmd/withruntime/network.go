package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"withruntime.dev/runtime/internal/api"
)

// networkFlags are the network settings of run and create.
type networkFlags struct {
	internet bool
	allow    []string
	deny     []string
	secrets  []string
}

func (f *networkFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.internet, "internet", false, "let the sandbox reach the whole public internet (default: no network)")
	cmd.Flags().StringArrayVar(&f.allow, "allow", nil, "let the sandbox reach HOST (a name, *.wildcard, IP or CIDR; repeatable)")
	cmd.Flags().StringArrayVar(&f.deny, "deny", nil, "with --internet, never reach HOST (repeatable)")
	cmd.Flags().StringArrayVar(&f.secrets, "secret", nil, "give the sandbox the stored secret NAME (see: withruntime secrets; repeatable)")
}

// apply sets the request's network and secrets.
func (f *networkFlags) apply(req *api.CreateSandboxRequest) error {
	if f.internet && len(f.allow) > 0 {
		return errors.New("--internet and --allow do not go together: --internet allows everything (narrow it with --deny)")
	}
	if len(f.deny) > 0 && !f.internet {
		return errors.New("--deny needs --internet (without it, only --allow'ed hosts are reachable)")
	}
	if f.internet || len(f.allow) > 0 {
		req.Network = &api.NetworkPolicy{Internet: f.internet, Allow: f.allow, Deny: f.deny}
	}
	req.Secrets = f.secrets
	return nil
}

func newSecretsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "secrets", Short: "Manage secrets that sandboxes use without holding them"}
	var hosts, owner string
	set := &cobra.Command{
		Use:   "set NAME --hosts HOST[,HOST...]",
		Short: "Store a secret; its value is read from stdin (never from arguments)",
		Long: "Stores a write-only secret. Sandboxes created with --secret NAME see NAME as a placeholder;\n" +
			"the host's egress proxy swaps in the value for requests to the secret's hosts only.\n" +
			"The value is read from stdin: `withruntime secrets set OPENAI_API_KEY --hosts api.openai.com < key.txt`.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if hosts == "" {
				return errors.New("--hosts is required: the hosts whose requests get the secret")
			}
			if fi, err := os.Stdin.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				fmt.Fprintf(os.Stderr, "withruntime: enter the value of %s, then press Enter:\n", args[0])
			}
			value, err := bufio.NewReader(io.LimitReader(os.Stdin, 64<<10)).ReadString('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			value = strings.TrimRight(value, "\r\n")
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			sec, err := s.SetSecret(cmd.Context(), api.CreateSecretRequest{Name: args[0], Value: value, Hosts: strings.Split(hosts, ","), Owner: owner})
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "withruntime: secret %s stored for %s\n", sec.Name, strings.Join(sec.Hosts, ", "))
			return nil
		},
	}
	set.Flags().StringVar(&hosts, "hosts", "", "comma-separated hosts (names or *.wildcards) whose HTTPS requests get the value")
	set.Flags().StringVar(&owner, "owner", "", "the tenant key (key_...) the secret is for (keys without a daily limit only; default: the server's own secrets)")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List secrets (owners, names and hosts; values are never shown)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			list, err := s.ListSecrets(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tOWNER\tHOSTS\tUPDATED")
			for _, sec := range list {
				own := sec.Owner
				if own == "" {
					own = "-" // the server's own
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", sec.Name, own, strings.Join(sec.Hosts, ","), sec.UpdatedAt.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	rm := &cobra.Command{
		Use:   "rm NAME",
		Short: "Delete a secret",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			return s.DeleteSecret(cmd.Context(), args[0], owner)
		},
	}
	rm.Flags().StringVar(&owner, "owner", "", "the tenant key (key_...) whose secret to delete (keys without a daily limit only)")
	cmd.AddCommand(set, ls, rm)
	return cmd
}
