package main

import (
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"withruntime.dev/runtime/internal/template"
)

func newTemplateCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "template", Short: "Build and list templates (root filesystems)"}
	var missing bool
	var dir string
	build := &cobra.Command{
		Use:   "build NAME",
		Short: "Build (or rebuild) a template on this host; known recipes: base, " + template.CodeInterpreter,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Getenv("WITHRUNTIME_URL") != "" {
				return errors.New("templates are built on the server's host: run `withruntime template build` there (without WITHRUNTIME_URL)")
			}
			var ts *template.Store
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
				ts = s.embedded.Templates
			}
			b := ts.Build
			if missing {
				b = ts.Ensure
			}
			info, err := b(cmd.Context(), args[0], printProgress)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "withruntime: template %s built (%d MiB)\n", info.Name, info.SizeBytes>>20)
			return nil
		},
	}
	build.Flags().BoolVar(&missing, "missing", false, "build only if the template is missing or was built from another version of its recipe")
	build.Flags().StringVar(&dir, "templates-dir", os.Getenv("WITHRUNTIME_TEMPLATES_DIR"), "directory of templates (default: the server's, DATA_DIR/templates)")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List templates",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			ts, err := s.ListTemplates(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSIZE\tBUILT")
			for _, t := range ts {
				fmt.Fprintf(tw, "%s\t%dMiB\t%s\n", t.Name, t.SizeBytes>>20, t.CreatedAt.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	cmd.AddCommand(build, ls)
	return cmd
}

func newKeysCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Manage API keys"}
	var dailyLimitUSD float64
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
			k, err := s.CreateKeyWithLimit(cmd.Context(), args[0], limit)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "withruntime: key %s (%s) created; its secret is shown once:\n", k.ID, k.Name)
			fmt.Println(k.Secret)
			return nil
		},
	}
	create.Flags().Float64Var(&dailyLimitUSD, "daily-limit-usd", 0, "cap on what the key's sandboxes may cost per UTC day, in USD (e.g. 5 or 0.25; default none)")
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
			fmt.Fprintln(tw, "ID\tNAME\tPREFIX\tCREATED\tREVOKED\tDAILY LIMIT")
			for _, k := range keys {
				revoked := "-"
				if k.RevokedAt != nil {
					revoked = k.RevokedAt.Local().Format(time.DateTime)
				}
				limit := "-"
				if k.DailyLimitMicros > 0 {
					limit = usd(k.DailyLimitMicros)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s…\t%s\t%s\t%s\n", k.ID, k.Name, k.Prefix, k.CreatedAt.Local().Format(time.DateTime), revoked, limit)
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
