package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/template"
)

func newTemplateCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "template", Short: "Build and list templates (root filesystems)"}
	var fromImage string
	var bf buildFlags
	var missing bool
	var dir string
	build := &cobra.Command{
		Use:   "build NAME [--from-image REF | -f Dockerfile [CONTEXT]]",
		Short: "Build (or rebuild) a template from its recipe (base, " + template.CodeInterpreter + "), or make a new one from a container image",
		Long: `Without --from-image, build (or rebuild) the template NAME from its built-in recipe on this host
(known recipes: base, ` + template.CodeInterpreter + `; with --missing only if it is missing or stale).

With --from-image, make the new template NAME from a linux/amd64 container image:
  REGISTRY/REPO[:TAG|@DIGEST]   pulled by the server, with the docker credentials of the user it runs as
  oci-layout:DIR, or a DIR path  an OCI image layout on this machine (uploaded to the server)
  FILE.tar                      a ` + "`docker save`" + ` tarball on this machine (uploaded to the server)
Its sandboxes run commands as "user" (uid 1000, added if the image has none) in /workspace, with
bash, or /bin/sh when the image has no bash, and start with the image's environment.

With -f, build the new template NAME from a Dockerfile and the build context CONTEXT (default .,
less what its .dockerignore excludes): FROM a template of the server or an image, then RUN, ENV,
WORKDIR, USER, COPY, ADD (files from the context), ARG and CMD. RUN steps run in a sandbox on the server,
with the network --internet and --allow give them (none by default).

A template with a start is warm (with -f or --from-image): the build boots a sandbox of it, runs
--start-cmd (a Dockerfile's CMD by default) in the background, runs --ready-cmd until it exits 0
(at most --ready-timeout seconds, default 60; if it never does the build fails with its last
output), and saves that sandbox; every create of the template starts from the save, so the first
command finds the server answering. Example:
  withruntime template build web -f Dockerfile --start-cmd 'python3 -m http.server 8000' --ready-cmd 'curl -sf localhost:8000'`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if bf.file != "" && fromImage != "" {
				return errors.New("give either --from-image or -f, not both")
			}
			if bf.file != "" {
				dir := "."
				if len(args) == 2 {
					dir = args[1]
				}
				return buildFromDockerfile(cmd.Context(), args[0], dir, bf)
			}
			if len(args) == 2 {
				return errors.New("a build CONTEXT goes with -f Dockerfile")
			}
			if fromImage != "" {
				return buildFromImage(cmd.Context(), args[0], fromImage, bf.startFlags())
			}
			if bf.startFlags() != nil {
				return errors.New("--start-cmd, --ready-cmd, --ready-timeout and --start-kernel go with -f Dockerfile or --from-image: a built-in recipe's template has its recipe's start (" + template.CodeInterpreter + ": its kernel); to make a warm template of your own, build FROM one (a Dockerfile of FROM base and CMD) with these flags")
			}
			if os.Getenv("WITHRUNTIME_URL") != "" {
				return errors.New("templates are built on the server's host: run `withruntime template build` there (without WITHRUNTIME_URL)")
			}
			var ts *template.Store
			if dir == "" && missing {
				// Ensuring a recipe needs no server: the data directory's own
				// templates directory (builds of one name lock each other
				// out across processes, a running server included).
				dir = filepath.Join(dataDir(), "templates")
			}
			if dir != "" {
				// A templates directory of its own: no server needed (builds
				// of one name lock each other out across processes).
				ts = &template.Store{Dir: dir}
			} else {
				s, err := embed(cmd.Context(), "")
				if err != nil {
					return err
				}
				defer s.Close()
				if s.embedded == nil {
					return errors.New("a withruntime serve runs on this data directory: build with --missing, or --templates-dir DIR, or stop the server first")
				}
				ts = s.embedded.Templates
			}
			b := ts.Build
			if missing {
				b = ts.Ensure
			}
			start := time.Now()
			info, err := b(cmd.Context(), args[0], printProgress)
			if err != nil {
				return err
			}
			if info.CreatedAt.Before(start.Add(-time.Second)) {
				fmt.Fprintf(os.Stderr, "withruntime: template %s is current (built %s, %d MiB)\n", info.Name, info.CreatedAt.Local().Format(time.DateTime), info.SizeBytes>>20)
				return nil
			}
			fmt.Fprintf(os.Stderr, "withruntime: template %s built (%d MiB)\n", info.Name, info.SizeBytes>>20)
			return nil
		},
	}
	build.Flags().StringVarP(&bf.file, "file", "f", "", "build from this Dockerfile (with the build context CONTEXT, default .)")
	build.Flags().StringArrayVar(&bf.buildArgs, "build-arg", nil, "an ARG's value, KEY=VALUE (repeatable)")
	build.Flags().BoolVar(&bf.internet, "internet", false, "let RUN steps reach the internet")
	build.Flags().StringArrayVar(&bf.allow, "allow", nil, "a host or CIDR that RUN steps may reach (repeatable)")
	build.Flags().StringVar(&bf.start.Command, "start-cmd", "", "with -f or --from-image: the template's start command, run in the background in every sandbox before it is handed out (a Dockerfile's CMD by default)")
	build.Flags().StringVar(&bf.start.ReadyCommand, "ready-cmd", "", "with a start: a command run until it exits 0 before the template's warm snapshot is taken")
	build.Flags().Int64Var(&bf.start.ReadyTimeoutSeconds, "ready-timeout", 0, "seconds --ready-cmd may take to pass (default 60, at most 600)")
	build.Flags().BoolVar(&bf.start.Kernel, "start-kernel", false, "with a start: also start the default code context's kernel with the usual imports (a template with ipykernel)")
	build.Flags().BoolVar(&missing, "missing", false, "with a recipe: build only if the template is missing or was built from another version of its recipe")
	build.Flags().StringVar(&dir, "templates-dir", os.Getenv("WITHRUNTIME_TEMPLATES_DIR"), "with a recipe: the directory of templates to build in, without a server (default: the server's, DATA_DIR/templates)")
	build.Flags().StringVar(&fromImage, "from-image", "", "make the template from this container image (a registry reference, oci-layout:DIR or FILE.tar)")
	cmd.AddCommand(build, newTemplateLsCmd(), newTemplateRmCmd(), newTemplatePushCmd(), newTemplatePushAgentCmd())
	return cmd
}

func newKeysCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Manage API keys"}
	var dailyLimitUSD float64
	var quota api.CreateKeyRequest
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an API key and print its secret (shown once)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			limit, err := usdToMicros(dailyLimitUSD)
			if err != nil {
				return err
			}
			req := quota
			req.Name, req.DailyLimitMicros = args[0], limit
			k, err := s.CreateKeyWith(cmd.Context(), req)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "withruntime: key %s (%s) created; its secret is shown once:\n", k.ID, k.Name)
			fmt.Println(k.Secret)
			return nil
		},
	}
	create.Flags().Float64Var(&dailyLimitUSD, "daily-limit-usd", 0, "cap on what the key's sandboxes may cost per UTC day, in USD (e.g. 5 or 0.25; default none)")
	const quotaDefault = " (default: the server's for a key with a daily limit, none for an administrator's; see serve --key-*-quota*)"
	create.Flags().Int64Var(&quota.DiskQuotaMiB, "disk-quota-mib", 0, "cap on the host disk the key's sandboxes hold, in MiB: its running and paused sandboxes' diskMiB plus its pause images"+quotaDefault)
	create.Flags().Int64Var(&quota.PausedQuota, "paused-quota", 0, "cap on how many of the key's sandboxes may be paused at once"+quotaDefault)
	create.Flags().Int64Var(&quota.SandboxesQuota, "sandboxes-quota", 0, "cap on how many sandboxes the key may hold at once, starting, running and paused together"+quotaDefault)
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List API keys",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			keys, err := s.ListKeys(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tPREFIX\tCREATED\tREVOKED\tDAILY LIMIT\tQUOTAS")
			for _, k := range keys {
				revoked := "-"
				if k.RevokedAt != nil {
					revoked = k.RevokedAt.Local().Format(time.DateTime)
				}
				limit := "-"
				if k.DailyLimitMicros > 0 {
					limit = usd(k.DailyLimitMicros)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s…\t%s\t%s\t%s\t%s\n", k.ID, k.Name, k.Prefix, k.CreatedAt.Local().Format(time.DateTime), revoked, limit, quotaSummary(k))
			}
			return tw.Flush()
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an API key",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			return s.RevokeKey(cmd.Context(), args[0])
		},
	}
	cmd.AddCommand(create, ls, revoke)
	return cmd
}

// quotaSummary says which quotas bind key k ("-": none), for keys ls:
// "disk 32768 MiB, 32 sandboxes, 16 paused".
func quotaSummary(k api.Key) string {
	var parts []string
	if k.DiskQuotaMiB > 0 {
		parts = append(parts, fmt.Sprintf("disk %d MiB", k.DiskQuotaMiB))
	}
	if k.SandboxesQuota == 1 {
		parts = append(parts, "1 sandbox")
	} else if k.SandboxesQuota > 0 {
		parts = append(parts, fmt.Sprintf("%d sandboxes", k.SandboxesQuota))
	}
	if k.PausedQuota > 0 {
		parts = append(parts, fmt.Sprintf("%d paused", k.PausedQuota))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
