package main

import (
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"withruntime.dev/runtime/internal/api"
)

// newSnapshotSandboxCmd is `sandbox snapshot ID`.
func newSnapshotSandboxCmd() *cobra.Command {
	var name, mode string
	cmd := &cobra.Command{
		Use:   "snapshot ID",
		Short: "Save a running sandbox whole (processes, memory, files) as a snapshot; it runs on. Prints the snapshot's id",
		Long: `Save a running sandbox whole as a snapshot and print the snapshot's id; the
sandbox runs on after a brief pause. Start sandboxes from it with
'withruntime sandbox create --snapshot ID|NAME'; list and delete snapshots
with 'withruntime snapshot ls|rm'. A snapshot counts in the key's disk quota
and is billed at the storage price until deleted.

--mode filesystem saves only the files of the root filesystem (not /tmp,
/dev/shm or volumes), with no pause at all; a sandbox created from it boots
fresh with those files.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			sn, err := s.CreateSnapshot(cmd.Context(), args[0], api.CreateSnapshotRequest{Name: name, Mode: mode})
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "withruntime: snapshot of %s: %s\n", args[0], mib(sn.Bytes))
			_, err = fmt.Println(sn.ID)
			return err
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "a name for the snapshot among your key's, usable instead of its id")
	cmd.Flags().StringVar(&mode, "mode", "full", `what to save: "full" (processes, memory, files) or "filesystem" (the root filesystem's files alone)`)
	return cmd
}

// newForkCmd is `sandbox fork ID -n N`.
func newForkCmd() *cobra.Command {
	var count int
	var timeout time.Duration
	var env []string
	var keep, mode string
	cmd := &cobra.Command{
		Use:   "fork ID",
		Short: "Make N new sandboxes from one snapshot of a running sandbox (which runs on); prints their ids",
		Long: `Take one snapshot of a running sandbox and start N sandboxes from it, each
with its own id, lease and network, printed one per line. Each succeeds or
fails on its own: failures are reported on stderr and make the exit status 1.
The snapshot is deleted afterwards unless --keep NAME. --mode filesystem
takes a files-only snapshot: each new sandbox boots fresh with the source's
root filesystem files (no process of the source runs in it).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout < 0 {
				return fmt.Errorf("--timeout must be positive; got %s", timeout)
			}
			envs, err := pairs("--env", env)
			if err != nil {
				return err
			}
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			res, err := s.ForkSandbox(cmd.Context(), args[0], api.ForkRequest{Count: count, Mode: mode, TimeoutSeconds: int64(timeout / time.Second),
				Env: envs, KeepSnapshot: keep != "", Name: keep})
			if err != nil {
				return err
			}
			var failed []error
			for i, f := range res.Sandboxes {
				if f.Sandbox == nil {
					msg := "no answer"
					if f.Error != nil {
						msg = f.Error.Code + ": " + f.Error.Message
					}
					failed = append(failed, fmt.Errorf("fork %d: %s", i+1, msg))
					continue
				}
				fmt.Println(f.Sandbox.ID)
			}
			if res.SnapshotKept {
				fmt.Fprintf(os.Stderr, "withruntime: snapshot %s (%s) kept\n", res.Snapshot.ID, res.Snapshot.Name)
			}
			return errors.Join(failed...)
		},
	}
	cmd.Flags().IntVarP(&count, "count", "n", 1, "how many sandboxes to make (1 to 32)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "lease of each new sandbox (default: the server's, 5m)")
	cmd.Flags().StringArrayVarP(&env, "env", "e", nil, "environment variable KEY=VALUE for commands started in the new sandboxes (repeatable)")
	cmd.Flags().StringVar(&keep, "keep", "", "keep the fork's snapshot under this name")
	cmd.Flags().StringVar(&mode, "mode", "full", `what the snapshot holds: "full" (processes, memory, files) or "filesystem" (the root filesystem's files alone; each new sandbox boots fresh)`)
	return cmd
}

// newSnapshotCmd is `snapshot ls|rm`.
func newSnapshotCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "snapshot", Short: "List and delete snapshots (take them with 'sandbox snapshot')"}
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List your snapshots",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			snaps, err := s.ListSnapshots(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tMODE\tSOURCE\tTEMPLATE\tMEMORY\tSIZE\tCREATED\tEXPIRES")
			for _, sn := range snaps {
				expires := "-" // kept until deleted
				if sn.ExpiresAt != nil {
					expires = sn.ExpiresAt.Local().Format(time.DateTime)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d MiB\t%s\t%s\t%s\n", sn.ID, sn.Name, sn.Mode, sn.SourceSandboxID, sn.Template, sn.MemoryMiB,
					mib(sn.Bytes), sn.CreatedAt.Local().Format(time.DateTime), expires)
			}
			return tw.Flush()
		},
	}
	rm := &cobra.Command{
		Use:   "rm ID|NAME [ID|NAME...]",
		Short: "Delete snapshots (sandboxes made from them run on)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			var errs []error
			for _, ref := range args {
				if err := s.DeleteSnapshot(cmd.Context(), ref); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", ref, err))
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.AddCommand(ls, rm)
	return cmd
}
