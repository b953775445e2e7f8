package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"withruntime.dev/runtime/internal/sandbox"
)

// addQuotaFlags adds serve's flags for the per-key quotas' server-wide
// defaults and the host disk's reserve (internal/sandbox/quota.go), and
// returns what sets them on a server's limits.
func addQuotaFlags(cmd *cobra.Command) func(*sandbox.Limits) error {
	def := sandbox.DefaultLimits()
	q := def.KeyQuotas
	var reserve int64
	cmd.Flags().Int64Var(&q.DiskMiB, "key-disk-quota-mib", q.DiskMiB, "default disk quota of a key with a daily limit, in MiB: its running and paused sandboxes' diskMiB plus its pause images; past it creates and pauses answer 507 disk_quota_exceeded (0: no default; a key's own, from keys create --disk-quota-mib, wins; keys without a daily limit have only their own)")
	cmd.Flags().Int64Var(&q.Sandboxes, "key-sandboxes-quota", q.Sandboxes, "default sandboxes quota of a key with a daily limit: how many sandboxes it may hold at once, starting, running and paused together; past it creates answer 429 quota_exceeded (0: no default; keys create --sandboxes-quota wins)")
	cmd.Flags().Int64Var(&q.PausedSandboxes, "key-paused-quota", q.PausedSandboxes, "default paused sandboxes quota of a key with a daily limit: how many of its sandboxes may be paused at once; past it pauses answer 429 quota_exceeded (0: no default; keys create --paused-quota wins)")
	cmd.Flags().Int64Var(&reserve, "disk-reserve-mib", 0, fmt.Sprintf("host disk, in MiB, that creates and pauses leave free for the store and templates; a create whose diskMiB, or a pause whose image, does not fit beside it answers 507 no_space (0: the larger of %d MiB and %d%% of the filesystem that holds the sandboxes; -1: none)", sandbox.DefaultDiskReserveMiB, sandbox.DefaultDiskReservePercent))
	return func(l *sandbox.Limits) error {
		if q.DiskMiB < 0 || q.Sandboxes < 0 || q.PausedSandboxes < 0 {
			return fmt.Errorf("--key-disk-quota-mib, --key-sandboxes-quota and --key-paused-quota must be 0 (no default) or more")
		}
		if reserve < -1 {
			return fmt.Errorf("--disk-reserve-mib must be -1 (none), 0 (the default) or a size in MiB; got %d", reserve)
		}
		l.KeyQuotas, l.DiskReserveMiB = q, reserve
		return nil
	}
}
