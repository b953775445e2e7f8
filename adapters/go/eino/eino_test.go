package eino_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	runtimeeino "withruntime.dev/runtime/adapters/go/eino"
	"withruntime.dev/runtime/adapters/go/testserver"
	withruntime "withruntime.dev/runtime/sdk/go"
	"withruntime.dev/runtime/sdk/go/tools"
)

// TestReactAgentRunsPythonInSandbox runs Eino's own ReAct agent loop
// (flow/agent/react) with a scripted tool-calling chat model against a real
// Runtime server and gVisor sandbox: the model writes hello.py, runs it, and
// answers with what the tool result said.
func TestReactAgentRunsPythonInSandbox(t *testing.T) {
	testserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	sbx, err := withruntime.Create(ctx, withruntime.Options{TimeoutSeconds: 300})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := sbx.Close(); err != nil {
			t.Errorf("destroying the sandbox: %v", err)
		}
	}()

	cm := &scriptedModel{rec: &recorder{}, steps: []func(in []*schema.Message) *schema.Message{
		func([]*schema.Message) *schema.Message {
			return toolCall("call_write", tools.WriteFileName, `{"path": "hello.py", "content": "print(6 * 7)\n"}`)
		},
		func([]*schema.Message) *schema.Message {
			return toolCall("call_exec", tools.ExecName, `{"command": "python3 hello.py", "cwd": "", "timeoutSeconds": 0}`)
		},
		func(in []*schema.Message) *schema.Message {
			// The answer is made from the tool result the loop handed back.
			last := in[len(in)-1]
			return schema.AssistantMessage("hello.py ran in the sandbox:\n"+last.Content, nil)
		},
	}}

	agent, err := react.NewAgent(ctx, &react.AgentConfig{
		ToolCallingModel: cm,
		ToolsConfig:      compose.ToolsNodeConfig{Tools: runtimeeino.ForSandbox(sbx)},
		MaxStep:          12,
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := agent.Generate(ctx, []*schema.Message{schema.UserMessage("Write hello.py that prints 6 * 7 and run it.")})
	if err != nil {
		t.Fatal(err)
	}

	// The agent bound the four tools, with the SDK's schemas, to the model.
	var names []string
	for _, ti := range cm.rec.tools {
		names = append(names, ti.Name)
	}
	if want := "runtime_exec,runtime_read_file,runtime_write_file,runtime_list_files"; strings.Join(names, ",") != want {
		t.Fatalf("tools bound to the model: %v, want %s", names, want)
	}

	inputs := cm.rec.inputs
	if len(inputs) != 3 {
		t.Fatalf("the model was called %d times, want 3", len(inputs))
	}
	// The loop handed each tool result back to the model, as a tool message
	// answering the call.
	if m := toolMessage(inputs[1], "call_write"); m == nil || !strings.Contains(m.Content, "/workspace/hello.py") {
		t.Fatalf("second model call got no runtime_write_file result: %s", dump(inputs[1]))
	}
	m := toolMessage(inputs[2], "call_exec")
	if m == nil || !strings.Contains(m.Content, "42") || !strings.Contains(m.Content, "exit_code: 0") {
		t.Fatalf("third model call got no runtime_exec result with 42: %s", dump(inputs[2]))
	}
	if m.ToolName != tools.ExecName {
		t.Errorf("tool message names %q, want %s", m.ToolName, tools.ExecName)
	}
	t.Logf("tool message the model received:\n%s", m.Content)
	// The sandbox is a real gVisor sandbox.
	if r, err := sbx.Run(ctx, "dmesg | head -1"); err != nil || !strings.Contains(r.Stdout, "gVisor") {
		t.Fatalf("sandbox kernel: %+v %v", r, err)
	}

	// The final state: the agent's answer, and the file in the sandbox.
	if out.Role != schema.Assistant || !strings.Contains(out.Content, "42") {
		t.Fatalf("final answer: %+v", out)
	}
	if b, err := sbx.Files().ReadFile(ctx, "hello.py"); err != nil || string(b) != "print(6 * 7)\n" {
		t.Fatalf("hello.py in the sandbox: %q %v", b, err)
	}
}

// The Eino tools declare exactly the SDK's names, descriptions and schemas.
func TestInfoMatchesSDK(t *testing.T) {
	ctx := context.Background()
	defs := tools.Definitions()
	ets := runtimeeino.Bind(func(context.Context) (*withruntime.Sandbox, error) {
		return nil, fmt.Errorf("no sandbox in this test")
	})
	if len(ets) != len(defs) {
		t.Fatalf("%d tools, want %d", len(ets), len(defs))
	}
	for i, et := range ets {
		info, err := et.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Name != defs[i].Name || info.Desc != defs[i].Description {
			t.Errorf("tool %d: %s %q", i, info.Name, info.Desc)
		}
		js, err := info.ToJSONSchema()
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(js)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(defs[i].InputSchema, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: schema given to the model\n%s\nwant\n%s", info.Name, got, defs[i].InputSchema)
		}
	}
}

// Invalid arguments are a result for the model (nil error) and never reach
// the sandbox; a Runtime failure is an error for the program.
func TestInvokableRunResults(t *testing.T) {
	ctx := context.Background()
	asked := false
	ets := runtimeeino.Bind(func(context.Context) (*withruntime.Sandbox, error) {
		asked = true
		return nil, withruntime.ErrLeaseEnded
	})
	exec := ets[0].(tool.InvokableTool)
	out, err := exec.InvokableRun(ctx, `{"cwd": ""}`)
	if err != nil || asked || !strings.HasPrefix(out, "error: ") || !strings.Contains(out, `missing "command"`) {
		t.Fatalf("invalid arguments: %q %v (sandbox asked: %v)", out, err, asked)
	}
	out, err = exec.InvokableRun(ctx, `{"command": "true"}`)
	if err == nil || !asked || !strings.Contains(out, "no longer running") || !strings.Contains(err.Error(), tools.ExecName) || !errors.Is(err, withruntime.ErrLeaseEnded) {
		t.Fatalf("sandbox gone: %q %v", out, err)
	}
}

// scriptedModel is a model.ToolCallingChatModel that answers each call with
// the next scripted step, recording what the agent loop sent it.
type scriptedModel struct {
	rec   *recorder
	steps []func(in []*schema.Message) *schema.Message
}

type recorder struct {
	mu     sync.Mutex
	inputs [][]*schema.Message
	tools  []*schema.ToolInfo
}

func (m *scriptedModel) Generate(_ context.Context, in []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	m.rec.mu.Lock()
	defer m.rec.mu.Unlock()
	m.rec.inputs = append(m.rec.inputs, append([]*schema.Message(nil), in...))
	n := len(m.rec.inputs)
	if n > len(m.steps) {
		return nil, fmt.Errorf("scripted model: call %d, only %d steps scripted", n, len(m.steps))
	}
	return m.steps[n-1](in), nil
}

func (m *scriptedModel) Stream(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := m.Generate(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
}

func (m *scriptedModel) WithTools(ts []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	m.rec.mu.Lock()
	defer m.rec.mu.Unlock()
	m.rec.tools = ts
	return &scriptedModel{rec: m.rec, steps: m.steps}, nil
}

func toolCall(id, name, args string) *schema.Message {
	return schema.AssistantMessage("", []schema.ToolCall{{ID: id, Type: "function", Function: schema.FunctionCall{Name: name, Arguments: args}}})
}

func toolMessage(in []*schema.Message, callID string) *schema.Message {
	for _, m := range in {
		if m.Role == schema.Tool && m.ToolCallID == callID {
			return m
		}
	}
	return nil
}

func dump(in []*schema.Message) string {
	b, _ := json.MarshalIndent(in, "", "  ")
	return string(b)
}
