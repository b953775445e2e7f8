// Package version says which build of Runtime this is, for `withruntime
// version`, GET /v1/health, the server's first log line and the agent's.
//
// The release is Release, which a packager may set at link time
// (-ldflags "-X withruntime.dev/runtime/internal/version.Release=1.2.3").
// The commit comes from Commit, CommitTime and Modified, which
// scripts/install.sh sets at link time from git, or else from the Go
// toolchain's build stamp (runtime/debug.BuildInfo, where GOFLAGS does not
// turn it off), so a bug report names the exact source without any release
// step.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
)

// Set at link time with -ldflags "-X withruntime.dev/runtime/internal/version.NAME=VALUE".
var (
	// Release is the release this build belongs to; "dev" for a build
	// from a checkout that no packager stamped.
	Release = "dev"
	// Commit is the git commit (40 hex digits), CommitTime its time (RFC
	// 3339), Modified "true" for a checkout with uncommitted changes.
	Commit, CommitTime, Modified string
)

// Info is a build's identity.
type Info struct {
	// Release is Release ("dev" unless stamped).
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

var get = sync.OnceValue(func() Info {
	info := Info{Release: Release, Go: runtime.Version()}
	if Commit != "" {
		info.Commit, info.CommitTime, info.Modified = Commit, CommitTime, Modified == "true"
		return info
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.time":
			info.CommitTime = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
})

// Get returns this binary's build identity.
func Get() Info { return get() }

// String is the identity on one line: "dev (commit 5f1558d1c2ab,
// 2026-12-01T20:27:12Z, modified) go1.26.8".
func (i Info) String() string {
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
