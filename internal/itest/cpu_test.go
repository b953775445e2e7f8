package itest

import (
	"fmt"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/api"
)

// cpuCounts is what a sandbox's programs learn of its CPUs: coreutils' nproc
// (sched_getaffinity), Python's os.cpu_count() (sysconf), and /proc/cpuinfo
// (what node's os.cpus() and many build tools read).
const cpuCounts = `echo "$(nproc) $(python3 -c 'import os;print(os.cpu_count())') $(grep -c ^processor /proc/cpuinfo)"`

// TestC24CPUCountMatchesGrant: a sandbox shows the vCPUs it was granted,
// rounded up, not the host's cores, so that build tools size their jobs to
// the grant. Cold and from the warm pool (whose sandboxes boot with the
// default of 1 vCPU).
func TestC24CPUCountMatchesGrant(t *testing.T) {
	e := newEnv(t, withPool(1))
	for _, tc := range []struct {
		cpu  float64
		want int
	}{{1, 1}, {0.5, 1}, {2, 2}, {1.5, 2}, {0, 1}} {
		t.Run(fmt.Sprint(tc.cpu), func(t *testing.T) {
			sb := e.create(api.CreateSandboxRequest{CPU: tc.cpu})
			want := strings.Repeat(fmt.Sprint(tc.want)+" ", 3)
			if res := e.sh(sb.ID, cpuCounts); res.Stdout != strings.TrimSpace(want)+"\n" {
				t.Errorf("--cpu %g: nproc, os.cpu_count(), /proc/cpuinfo = %q, want %q", tc.cpu, res.Stdout, strings.TrimSpace(want))
			}
			e.must(204, "DELETE", "/v1/sandboxes/"+sb.ID, nil, nil)
		})
	}
}
