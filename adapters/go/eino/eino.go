// Package eino gives a CloudWeGo Eino agent Runtime's four sandbox tools
// (runtime_exec, runtime_read_file, runtime_write_file, runtime_list_files)
// as Eino tools. It is a thin wrapper over withruntime.dev/runtime/sdk/go/tools:
// names, descriptions, JSON Schemas, argument checks, output caps and
// results all come from there.
//
//	import runtimeeino "withruntime.dev/runtime/adapters/go/eino"
//
//	sbx, err := withruntime.Create(ctx, withruntime.Options{TimeoutSeconds: 600})
//	if err != nil { return err }
//	defer sbx.Close()
//	agent, err := react.NewAgent(ctx, &react.AgentConfig{
//		ToolCallingModel: chatModel,
//		ToolsConfig:      compose.ToolsNodeConfig{Tools: runtimeeino.ForSandbox(sbx)},
//	})
//
// The same []tool.BaseTool goes in adk.ChatModelAgentConfig.ToolsConfig
// (adk.NewChatModelAgent) or deep.Config.ToolsConfig.
//
// Each tool is a tool.InvokableTool. Its string result is the SDK Result's
// Text, which is what the model should see: a failed command (its exit code
// and stderr), invalid arguments or a missing file are results with a nil
// error. InvokableRun returns an error only when Runtime itself failed (the
// sandbox's lease ended, the server is unreachable, ctx ended); Eino's tools
// node then ends the run with that error. To hand such failures to the model
// instead, wrap the tools with
// github.com/cloudwego/eino/components/tool/utils.WrapToolWithErrorHandler.
//
// Eino's react agent and ADK ChatModelAgent have no local shell or file
// tools of their own: an agent has only the tools listed in its
// ToolsConfig. Shell and file tools come from elsewhere, and are off as
// long as they are not added: the ADK filesystem middleware
// (github.com/cloudwego/eino/adk/middlewares/filesystem: ls, read_file,
// write_file, edit_file, glob, grep, and execute when its Backend is a
// ShellBackend; on the host with eino-ext's local backend) in
// ChatModelAgentConfig.Middlewares or deep.Config.Middlewares, and
// eino-ext's command-line tools (components/tool/commandline). See the
// README.
package eino

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/schema"
	"github.com/eino-contrib/jsonschema"

	withruntime "withruntime.dev/runtime/sdk/go"
	"withruntime.dev/runtime/sdk/go/tools"
)

// Tool is one Runtime tool as an Eino tool.InvokableTool.
type Tool struct {
	t tools.Tool
}

var _ tool.InvokableTool = (*Tool)(nil)

// NewTool wraps one SDK tool.
func NewTool(t tools.Tool) *Tool { return &Tool{t: t} }

// Tools wraps SDK tools, in order, for an Eino ToolsConfig.
func Tools(ts []tools.Tool) []tool.BaseTool {
	out := make([]tool.BaseTool, len(ts))
	for i, t := range ts {
		out[i] = NewTool(t)
	}
	return out
}

// ForSandbox returns the four tools bound to sbx (tools.ForSandbox).
func ForSandbox(sbx *withruntime.Sandbox) []tool.BaseTool {
	return Tools(tools.ForSandbox(sbx))
}

// Bind returns the four tools bound to the sandbox get returns at each call
// (tools.Bind): for a sandbox created on first use, or replaced when its
// lease ends.
func Bind(get tools.SandboxFunc) []tool.BaseTool {
	return Tools(tools.Bind(get))
}

// SDKTool returns the SDK tool t wraps.
func (t *Tool) SDKTool() tools.Tool { return t.t }

// Info declares the tool to the model: its name, description and the SDK's
// JSON Schema, unchanged.
func (t *Tool) Info(context.Context) (*schema.ToolInfo, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(t.t.InputSchema, &s); err != nil {
		return nil, fmt.Errorf("%s: input schema: %w", t.t.Name, err)
	}
	return &schema.ToolInfo{Name: t.t.Name, Desc: t.t.Description, ParamsOneOf: schema.NewParamsOneOfByJSONSchema(&s)}, nil
}

// InvokableRun runs one call with the model's arguments (a JSON object) and
// returns the text for the model. The error is non-nil only when Runtime
// itself failed; it wraps the SDK's error (errors.Is matches
// withruntime.ErrLeaseEnded and the rest).
func (t *Tool) InvokableRun(ctx context.Context, argumentsInJSON string, _ ...tool.Option) (string, error) {
	res, err := t.t.Execute(ctx, json.RawMessage(argumentsInJSON))
	if err != nil {
		return res.Text, fmt.Errorf("%s: %w", t.t.Name, err)
	}
	return res.Text, nil
}

// GetType names the component in Eino callbacks.
func (t *Tool) GetType() string { return "Runtime" }
