package itest

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"withruntime.dev/runtime/sdk/go/tools"
)

// `withruntime mcp --template code-interpreter` offers runtime_run_code,
// and a chart comes back as MCP image content that decodes.
func TestMCPRunCode(t *testing.T) {
	needCodeInterpreter(t)
	e := newEnv(t)
	bin := buildWithruntime(t)
	ctx := context.Background()
	cmd := exec.Command(bin, "mcp", "--lease", "10m", "--template", "code-interpreter")
	cmd.Env = append(os.Environ(), "WITHRUNTIME_URL="+e.http.URL, "WITHRUNTIME_API_KEY="+e.key)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "itest", Version: "0.0.1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	defer cs.Close()
	list, err := cs.ListTools(ctx, nil)
	if err != nil || len(list.Tools) != len(tools.Definitions())+1 {
		t.Fatalf("tools: %v %+v", err, list)
	}
	found := false
	for _, tool := range list.Tools {
		found = found || tool.Name == tools.RunCodeName && tool.Description == tools.CodeDefinitions()[0].Description
	}
	if !found {
		t.Fatalf("%s is not listed", tools.RunCodeName)
	}
	res := mcpCall(t, cs, tools.RunCodeName, map[string]any{"code": "x = 21", "language": ""})
	if res.IsError {
		t.Fatalf("%+v", res)
	}
	res = mcpCall(t, cs, tools.RunCodeName, map[string]any{"code": "import matplotlib.pyplot as plt\nplt.plot([x, x * 2]);\nx * 2", "language": "python"})
	if res.IsError || len(res.Content) != 2 {
		t.Fatalf("%d contents: %+v", len(res.Content), res)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	img, ok := res.Content[1].(*mcp.ImageContent)
	if !ok || img.MIMEType != "image/png" || !strings.Contains(text, "result:\n42") || !strings.Contains(text, "image 1 (image/png") {
		t.Fatalf("%q %+v", text, res.Content[1])
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(img.Data)); err != nil || cfg.Width < 100 {
		t.Fatalf("the image does not decode: %v %+v", err, cfg)
	}
	// The four tools work in the same sandbox: the kernel's files are theirs.
	mcpCall(t, cs, tools.RunCodeName, map[string]any{"code": "open('k.txt', 'w').write('from the kernel')", "language": ""})
	res = mcpCall(t, cs, "runtime_read_file", map[string]any{"path": "k.txt"})
	if res.IsError || !strings.Contains(mcpText(t, res), "from the kernel") {
		t.Fatalf("read: %+v", res)
	}
}
