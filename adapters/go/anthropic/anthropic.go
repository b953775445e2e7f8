// Package anthropic declares Runtime's code-execution tools (sdk/go/tools)
// with the official Anthropic Go SDK (github.com/anthropics/anthropic-sdk-go)
// and runs the model's tool_use blocks, as that SDK returns them, in a
// Runtime sandbox.
//
//	params.Tools = runtimeanthropic.Tools()
//	msg, _ := client.Messages.New(ctx, params)
//	var results []anthropic.ContentBlockParamUnion
//	for _, block := range msg.Content {
//		if block.Type == "tool_use" {
//			r, err := runtimeanthropic.Dispatch(ctx, ts, block.AsToolUse())
//			results = append(results, r)
//		}
//	}
//	params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(results...))
//
// An error Result comes back as a tool_result block with is_error set. The
// returned error is non-nil only when Runtime itself failed (see
// tools.Tool.Execute); the block is still fit for the model.
package anthropic

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go"

	"withruntime.dev/runtime/sdk/go/tools"
)

// Tools returns the four tools as Messages API custom tools.
func Tools() []anthropic.ToolUnionParam {
	defs := tools.Definitions()
	out := make([]anthropic.ToolUnionParam, len(defs))
	for i, d := range defs {
		out[i] = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
			Name:        d.Name,
			Description: anthropic.String(d.Description),
			InputSchema: inputSchema(d),
		}}
	}
	return out
}

// inputSchema carries the whole JSON Schema over: properties and required
// in their fields, every other keyword (additionalProperties, ...) as an
// extra field.
func inputSchema(d tools.Definition) anthropic.ToolInputSchemaParam {
	var m map[string]any
	if err := json.Unmarshal(d.InputSchema, &m); err != nil {
		// The SDK's schemas are constant, valid JSON objects.
		panic(fmt.Sprintf("runtime anthropic: schema of %s: %v", d.Name, err))
	}
	s := anthropic.ToolInputSchemaParam{Properties: m["properties"], ExtraFields: map[string]any{}}
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				s.Required = append(s.Required, name)
			}
		}
	}
	for k, v := range m {
		switch k {
		case "type", "properties", "required":
		default:
			s.ExtraFields[k] = v
		}
	}
	return s
}

// Dispatch runs a tool_use block of a Messages answer
// (ContentBlockUnion.AsToolUse()) and returns the tool_result block that
// answers it, with is_error set for an error Result.
func Dispatch(ctx context.Context, ts []tools.Tool, block anthropic.ToolUseBlock) (anthropic.ContentBlockParamUnion, error) {
	res, err := tools.Dispatch(ctx, ts, block.Name, block.Input)
	return anthropic.NewToolResultBlock(block.ID, res.Text, res.IsError), err
}
