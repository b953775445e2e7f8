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
	"runtime"
	"runtime/debug"
	"sync"

	"withruntime.dev/runtime/sdk/go/wire"
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

// Info is a build's identity: the body GET /v1/health reports as
// "version" (package wire's BuildVersion, whose String prints it on one
// line).
type Info = wire.BuildVersion

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
