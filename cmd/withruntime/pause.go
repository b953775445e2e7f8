package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func newPauseCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "pause ID [ID...]",
		Short: "Pause sandboxes: save each whole (processes, memory, files) and stop it until resumed",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			var errs []error
			for _, id := range args {
				sb, err := s.PauseSandbox(cmd.Context(), id)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", id, err))
					continue
				}
				fmt.Printf("%s paused (image %s)\n", sb.ID, mib(sb.ImageBytes))
			}
			return errors.Join(errs...)
		},
	}
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
