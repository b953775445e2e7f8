package agent

import (
	"slices"
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
