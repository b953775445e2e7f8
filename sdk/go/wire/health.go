package wire

import "fmt"

// ServerHealth is the body of GET /v1/health: the server answers, and how
// its warm pool stands.
type ServerHealth struct {
	// OK is always true while the server answers.
	OK bool `json:"ok"`
	// Version is the answering server's build.
	Version BuildVersion `json:"version"`
	// Pool is, per pooled template, how many booted sandboxes the warm
	// pool keeps (size) and has waiting now (ready). Absent when the server
	// runs without a pool.
	Pool map[string]PoolStatus `json:"pool,omitempty"`
	// Leader is the leader election among the servers that share a store
	// (serve --leader-election). Absent without leader election.
	Leader *LeaderStatus `json:"leader,omitempty"`
}

// BuildVersion is which build of Runtime answers, as `withruntime version`
// prints it.
type BuildVersion struct {
	// Release is the release ("dev" unless a packager stamped it).
	Release string `json:"release"`
	// Commit is the git commit the binary was built from (40 hex digits),
	// "" when the build had no VCS stamp (e.g. built outside a checkout).
	Commit string `json:"commit,omitempty"`
	// CommitTime is the commit's time (RFC 3339, UTC), "" without a stamp.
	CommitTime string `json:"commitTime,omitempty"`
	// Modified is true when the checkout had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// Go is the Go toolchain that built it ("go1.26.8").
	Go string `json:"go"`
}

// String is the identity on one line: "dev (commit 5f1558d1c2ab,
// 2026-12-01T20:27:12Z, modified) go1.26.8".
func (i BuildVersion) String() string {
	s := i.Release
	if i.Commit != "" {
		c := i.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		s += fmt.Sprintf(" (commit %s, %s", c, i.CommitTime)
		if i.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s + " " + i.Go
}

// LeaderStatus is the leader election as the answering server sees it.
type LeaderStatus struct {
	// Identity is the answering server's identity in the election.
	Identity string `json:"identity"`
	// Leader is the leader's identity as last observed ("" while none is
	// known, e.g. just after a leader released the Lease).
	Leader string `json:"leader"`
	// Leading is true while the answering server is the leader and runs
	// the leader-only work (lease ends, warm pool, metering sampler).
	Leading bool `json:"leading"`
}

// PoolStatus is one template's warm pool, in sandboxes.
type PoolStatus struct {
	// Size is how many booted sandboxes the pool keeps ready now: it
	// follows the recent create rate, between Min and Max.
	Size int `json:"size"`
	// Ready is how many are booted and waiting now.
	Ready int `json:"ready"`
	// Min is the least it keeps (serve --pool-size).
	Min int `json:"min"`
	// Max is the most it keeps after a burst (serve --pool-max).
	Max int `json:"max"`
}
