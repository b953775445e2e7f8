package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// examples are the commands' examples, by command path, shown in --help and
// with every usage error. A command that sets its own Example keeps it.
var examples = map[string]string{
	"withruntime sandbox run":         "  withruntime sandbox run -- python3 -c 'print(6*7)'\n  withruntime sandbox run --allow pypi.org -- 'pip install --user requests'",
	"withruntime sandbox create":      "  id=$(withruntime sandbox create --timeout 10m)\n  id=$(withruntime sandbox create --snapshot warm-python)",
	"withruntime sandbox exec":        "  withruntime sandbox exec sbx_0123456789abcdef -- python3 -V\n  withruntime sandbox exec -it sbx_0123456789abcdef -- python3",
	"withruntime sandbox shell":       "  withruntime sandbox shell sbx_0123456789abcdef\n  withruntime sandbox shell sbx_0123456789abcdef -- htop",
	"withruntime sandbox attach":      "  withruntime sandbox attach sbx_0123456789abcdef 42",
	"withruntime sandbox ls":          "  withruntime sandbox ls",
	"withruntime sandbox kill":        "  withruntime sandbox kill sbx_0123456789abcdef",
	"withruntime sandbox pause":       "  withruntime sandbox pause sbx_0123456789abcdef",
	"withruntime sandbox resume":      "  withruntime sandbox resume sbx_0123456789abcdef",
	"withruntime sandbox snapshot":    "  withruntime sandbox snapshot sbx_0123456789abcdef --name warm-python",
	"withruntime sandbox fork":        "  withruntime sandbox fork sbx_0123456789abcdef -n 4",
	"withruntime snapshot ls":         "  withruntime snapshot ls",
	"withruntime snapshot rm":         "  withruntime snapshot rm warm-python",
	"withruntime sandbox cp":          "  withruntime sandbox cp ./data.csv sbx_0123456789abcdef:/workspace/\n  withruntime sandbox cp sbx_0123456789abcdef:/workspace/out ./out",
	"withruntime template build":      "  withruntime template build base\n  withruntime template build mypy --from-image python:3.12-slim\n  withruntime template build web -f Dockerfile .",
	"withruntime template ls":         "  withruntime template ls",
	"withruntime template rm":         "  withruntime template rm mypy",
	"withruntime template push":       "  withruntime template push base --image registry.example.com/runtime/base:v1",
	"withruntime keys create":         "  withruntime keys create ci\n  withruntime keys create tenant-a --daily-limit-usd 5",
	"withruntime keys ls":             "  withruntime keys ls",
	"withruntime keys revoke":         "  withruntime keys revoke key_0123456789abcdef",
	"withruntime secrets set":         "  withruntime secrets set API_TOKEN --hosts api.example.com < token.txt",
	"withruntime secrets ls":          "  withruntime secrets ls",
	"withruntime secrets rm":          "  withruntime secrets rm API_TOKEN",
	"withruntime volume create":       "  withruntime volume create cache --size-mib 1024\n  withruntime sandbox create --volume cache:/data",
	"withruntime volume ls":           "  withruntime volume ls",
	"withruntime volume rm":           "  withruntime volume rm cache",
	"withruntime volume cp":           "  withruntime volume cp ./dataset cache:/dataset\n  withruntime volume cp cache:/results ./results",
	"withruntime login":               "  withruntime login https://runtime.example.com",
	"withruntime serve":               "  withruntime serve --listen 127.0.0.1:7780",
	"withruntime logout":              "  withruntime logout",
	"withruntime usage":               "  withruntime usage",
	"withruntime mcp":                 "  withruntime mcp",
	"withruntime template push-agent": "  withruntime template push-agent --image registry.example.com/runtime/agent:v1",
}

// usageError is a command line that the command cannot run: what was
// wrong, then the command's usage line and example, so that the fix is on
// the screen (cobra's own text is only "requires at least 2 arg(s), only
// received 0").
type usageError struct {
	err error
	cmd *cobra.Command
}

func (u usageError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v\nUsage: %s", u.err, u.cmd.UseLine())
	if u.cmd.Example != "" {
		fmt.Fprintf(&b, "\nExample:\n%s", u.cmd.Example)
	}
	fmt.Fprintf(&b, "\n(%s --help for more)", u.cmd.CommandPath())
	return b.String()
}

func (u usageError) Unwrap() error { return u.err }

// explainUsage gives every command of root its example and turns its
// argument and flag errors into usageErrors.
func explainUsage(root *cobra.Command) {
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{err, cmd}
	})
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		if ex, ok := examples[cmd.CommandPath()]; ok && cmd.Example == "" {
			cmd.Example = ex
		}
		if args := cmd.Args; args != nil {
			cmd.Args = func(cmd *cobra.Command, a []string) error {
				if err := args(cmd, a); err != nil {
					return usageError{err, cmd}
				}
				return nil
			}
		}
		for _, c := range cmd.Commands() {
			walk(c)
		}
	}
	walk(root)
}

// cliHints are the server's hints written for API clients, each with what a
// CLI user types instead. The server cannot know who asks, so the CLI
// rewrites them in the errors it prints.
var cliHints = strings.NewReplacer(
	"list yours with GET /v1/sandboxes", "list yours with `withruntime sandbox ls`",
	"list them with GET /v1/templates", "list them with `withruntime template ls`",
	"list keys with GET /v1/keys", "list keys with `withruntime keys ls`",
	"list yours with GET /v1/secrets", "list yours with `withruntime secrets ls`",
	"create it with POST /v1/secrets", "create it with `withruntime secrets set`",
	"(GET /files/list shows a directory's contents)", "(`withruntime sandbox exec ID -- ls -la DIR` shows a directory's contents)",
)
