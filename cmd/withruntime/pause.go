package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func newPauseCmd() *cobra.Command {
	var mode string
	var files bool
	cmd := &cobra.Command{
		Use:   "pause ID [ID...]",
		Short: "Pause sandboxes: save each whole (processes, memory, files), or its files alone, and stop it until resumed",
		Long: `Pause sandboxes: each is saved whole (processes with their memory, files)
and stopped; resume continues where it was.

--mode filesystem (or --filesystem) saves only the files of its root
filesystem (not /tmp, /dev/shm or volumes): its processes end and its memory
is freed at once, and resume boots it fresh with the same id and those files;
no process of before runs.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if files {
				if cmd.Flags().Changed("mode") && mode != "filesystem" {
					return fmt.Errorf("--filesystem and --mode %s disagree", mode)
				}
				mode = "filesystem"
			}
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			var errs []error
			for _, id := range args {
				sb, err := s.PauseSandboxMode(cmd.Context(), id, mode)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", id, err))
					continue
				}
				what := "image"
				if sb.ImageMode == "filesystem" {
					what = "files"
				}
				fmt.Printf("%s paused (%s %s)\n", sb.ID, what, mib(sb.ImageBytes))
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().StringVar(&mode, "mode", "full", `what to save: "full" (processes, memory, files) or "filesystem" (the root filesystem's files alone; resume boots fresh)`)
	cmd.Flags().BoolVar(&files, "filesystem", false, "the same as --mode filesystem")
	return cmd
}

func newResumeCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "resume ID [ID...]",
		Short: "Resume paused sandboxes where they were",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout < 0 {
				return fmt.Errorf("--timeout must be positive; got %s", timeout)
			}
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			var errs []error
			for _, id := range args {
				sb, err := s.ResumeSandbox(cmd.Context(), id, int64(timeout/time.Second))
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", id, err))
					continue
				}
				fmt.Printf("%s running until %s\n", sb.ID, sb.LeaseEndsAt.Local().Format(time.DateTime))
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "lease after the resume (default: the lease the sandbox was last given)")
	return cmd
}
