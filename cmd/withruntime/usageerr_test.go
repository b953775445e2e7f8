package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"withruntime.dev/runtime/internal/version"
)

// TestUsageErrors: a command line the command cannot run says what was
// wrong, then the usage line and an example, and nothing is run.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"sandbox", "exec"}, []string{"requires at least 2 arg(s), only received 0\nUsage: withruntime sandbox exec", "Usage: withruntime sandbox exec [-it] ID -- CMD [ARGS...]", "Example:\n  withruntime sandbox exec sbx_"}},
		{[]string{"keys", "create"}, []string{"Usage: withruntime keys create NAME", "withruntime keys create ci"}},
		{[]string{"sandbox", "create", "--no-such-flag"}, []string{"unknown flag: --no-such-flag", "Usage: withruntime sandbox create", "withruntime sandbox create --help for more"}},
	} {
		root := newRoot()
		root.SetArgs(c.args)
		root.SetOut(new(bytes.Buffer))
		err := root.Execute()
		var ue usageError
		if !errors.As(err, &ue) {
			t.Fatalf("%v: %v, want a usage error", c.args, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q lacks %q", c.args, err, w)
			}
		}
	}
	// Every command has an example.
	root := newRoot()
	for _, c := range allCommands(root) {
		if c.Runnable() && c.Example == "" {
			t.Errorf("%s has no example", c.CommandPath())
		}
	}
}

func TestVersion(t *testing.T) {
	t.Setenv("WITHRUNTIME_URL", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", "")
	for _, args := range [][]string{{"--version"}, {"version"}} {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !strings.Contains(out.String(), "withruntime "+version.Get().String()) {
			t.Errorf("%v printed %q", args, out.String())
		}
	}
}

func TestCLIHints(t *testing.T) {
	got := cliHints.Replace(`not found: no sandbox "sbx_x"; list yours with GET /v1/sandboxes`)
	if got != "not found: no sandbox \"sbx_x\"; list yours with `withruntime sandbox ls`" {
		t.Fatal(got)
	}
	if sandboxHours(1) != "1 sandbox-hour" || sandboxHours(2.5) != "2.5 sandbox-hours" {
		t.Fatal(sandboxHours(1), sandboxHours(2.5))
	}
}

// allCommands lists root's commands and theirs, depth first.
func allCommands(root *cobra.Command) []*cobra.Command {
	cmds := []*cobra.Command{root}
	for _, c := range root.Commands() {
		cmds = append(cmds, allCommands(c)...)
	}
	return cmds
}
