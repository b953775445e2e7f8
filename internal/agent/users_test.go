package agent

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

func TestCommandEnvUserBin(t *testing.T) {
	acct := account{Name: "user", Home: "/home/user"}
	env := commandEnv([]string{"PATH=/usr/bin:/bin"}, acct, nil)
	if !slices.Contains(env, "PATH=/home/user/.local/bin:/usr/bin:/bin") {
		t.Errorf("env %q: want ~/.local/bin first in PATH", env)
	}
	// Not twice, and a request's own PATH is taken as it is.
	env = commandEnv([]string{"PATH=/home/user/.local/bin:/bin"}, acct, nil)
	if !slices.Contains(env, "PATH=/home/user/.local/bin:/bin") {
		t.Errorf("env %q: ~/.local/bin added twice", env)
	}
	env = commandEnv(nil, acct, map[string]string{"PATH": "/opt/bin"})
	if !slices.Contains(env, "PATH=/opt/bin") {
		t.Errorf("env %q: the request's PATH was changed", env)
	}
	env = commandEnv(nil, account{Name: "root", Home: "/root"}, nil)
	if !slices.Contains(env, "PATH=/root/.local/bin:"+defaultPath) {
		t.Errorf("root's env %q", env)
	}
}

func TestCanEnter(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // TempDir makes them 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	open := filepath.Join(dir, "open")
	closed := filepath.Join(dir, "closed")
	for _, d := range []string{open, closed, filepath.Join(closed, "inner")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(dir)
	owner := int(st.Sys().(*syscall.Stat_t).Uid)
	stranger := account{Uid: owner + 4242, Gid: owner + 4242, Groups: []uint32{uint32(owner + 4242)}}
	if !canEnter(open, stranger) || canEnter(closed, stranger) || canEnter(filepath.Join(closed, "inner"), stranger) {
		t.Fatal("a stranger's view of 0755 and 0700 directories")
	}
	if !canEnter(closed, account{Uid: owner, Gid: owner}) || !canEnter(closed, account{Uid: 0}) {
		t.Fatal("the owner, or root, cannot enter a 0700 directory")
	}
}
