package dockerfile

import (
	"archive/tar"
	"bytes"
	"io"
	"path"
	"sort"
	"strings"

	"withruntime.dev/runtime/internal/template/rootfs"
)

// scratch is the build's own directory in the sandbox, left out of the
// result.
const scratch = "/.withruntime-build"

// The scripts that capture what the build changes, run as root in the
// sandbox with /bin/sh. GNU find and tar are needed (Debian, Ubuntu).
//
// Before the first step: every path of the root filesystem (its own mount
// only: -xdev leaves out /proc, /sys, /dev, /tmp and the runtime's mounts),
// then the marker whose change time is the build's start.
//
// After the last step: the paths again (their difference gives what was
// deleted), and a tar of every path whose change time (ctime, which
// nothing in the sandbox can set back) is after the marker: new files,
// changed content, mode or owner, and directories whose entries changed.
const (
	startScript = `set -e
mkdir -p ` + scratch + `
cd /
find . -xdev -path .` + scratch + ` -prune -o -print0 > ` + scratch + `/before
: > ` + scratch + `/start`
	endScript = `set -e
cd /
find . -xdev -path .` + scratch + ` -prune -o -print0 > ` + scratch + `/after
find . -xdev \( -path .` + scratch + ` -o -path ./etc/resolv.conf \) -prune -o -cnewer ` + scratch + `/start -print0 > ` + scratch + `/changed
tar --null --no-recursion --numeric-owner -T ` + scratch + `/changed -cf ` + scratch + `/changes.tar || [ $? -eq 1 ]`
)

// whiteouts returns a layer of whiteouts for the paths in before (a
// NUL-separated find listing, "./a/b") that are not in after: what the build
// deleted. A path under a deleted directory is covered by its directory's
// whiteout. Both listings come from the sandbox: names that are not clean
// paths are skipped (the flattener would refuse them anyway).
func whiteouts(before, after []byte) []byte {
	now := map[string]bool{}
	for _, p := range strings.Split(string(after), "\x00") {
		if c, err := rootfs.Clean(p); err == nil {
			now[c] = true
		}
	}
	var gone []string
	for _, p := range strings.Split(string(before), "\x00") {
		c, err := rootfs.Clean(p)
		if err != nil || c == "" || now[c] {
			continue
		}
		gone = append(gone, c)
	}
	sort.Strings(gone)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	last := ""
	for _, g := range gone {
		if last != "" && strings.HasPrefix(g, last+"/") {
			continue // under a deleted directory
		}
		last = g
		dir, base := path.Split(g)
		_ = tw.WriteHeader(&tar.Header{Name: dir + ".wh." + base, Typeflag: tar.TypeReg, Mode: 0o600})
	}
	_ = tw.Close()
	return buf.Bytes()
}

// readAll reads r fully (the listings are capped by the download).
func readAll(r io.Reader) []byte {
	b, _ := io.ReadAll(r)
	return b
}
