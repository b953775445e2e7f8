//go:build tools

// Package runsc only pins gvisor.dev/gvisor/runsc for `go build`.
package runsc

import _ "gvisor.dev/gvisor/runsc"
