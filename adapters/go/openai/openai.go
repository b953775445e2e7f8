// Package openai declares Runtime's code-execution tools (sdk/go/tools) with
// the official OpenAI Go SDK (github.com/openai/openai-go/v3) and runs the
// model's tool calls, as that SDK returns them, in a Runtime sandbox.
//
// Chat Completions:
//
//	params.Tools = runtimeopenai.ChatTools()
//	comp, _ := client.Chat.Completions.New(ctx, params)
//	for _, call := range comp.Choices[0].Message.ToolCalls {
//		msg, err := runtimeopenai.DispatchChat(ctx, ts, call)
//		params.Messages = append(params.Messages, msg)
//	}
//
// Responses:
//
//	params.Tools = runtimeopenai.ResponsesTools()
//	resp, _ := client.Responses.New(ctx, params)
//	for _, item := range resp.Output {
//		if item.Type == "function_call" {
//			out, err := runtimeopenai.DispatchResponses(ctx, ts, item.AsFunctionCall())
//			...
//		}
//	}
//
// OpenAI has no error flag on a tool result: an error Result is plain
// content whose text says what went wrong ("error: ..."). The error
// returned by the Dispatch functions is non-nil only when Runtime itself
// failed (see tools.Tool.Execute); the returned message is still fit for
// the model.
package openai

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"withruntime.dev/runtime/sdk/go/tools"
)

func schemaMap(d tools.Definition) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(d.InputSchema, &m); err != nil {
		// The SDK's schemas are constant, valid JSON objects.
		panic(fmt.Sprintf("runtime openai: schema of %s: %v", d.Name, err))
	}
	return m
}

// ChatTools returns the four tools as Chat Completions function tools
// (strict: the schemas meet strict mode's rules).
func ChatTools() []openai.ChatCompletionToolUnionParam {
	defs := tools.Definitions()
	out := make([]openai.ChatCompletionToolUnionParam, len(defs))
	for i, d := range defs {
		out[i] = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        d.Name,
			Description: openai.String(d.Description),
			Parameters:  shared.FunctionParameters(schemaMap(d)),
			Strict:      openai.Bool(true),
		})
	}
	return out
}

// ResponsesTools returns the four tools as Responses function tools
// (strict).
func ResponsesTools() []responses.ToolUnionParam {
	defs := tools.Definitions()
	out := make([]responses.ToolUnionParam, len(defs))
	for i, d := range defs {
		out[i] = responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
			Name:        d.Name,
			Description: openai.String(d.Description),
			Parameters:  schemaMap(d),
			Strict:      openai.Bool(true),
		}}
	}
	return out
}

// DispatchChat runs one tool call of a Chat Completions assistant message
// (ChatCompletionMessage.ToolCalls[i]) and returns the "tool" message that
// answers it.
func DispatchChat(ctx context.Context, ts []tools.Tool, call openai.ChatCompletionMessageToolCallUnion) (openai.ChatCompletionMessageParamUnion, error) {
	if call.Type != "" && call.Type != "function" {
		text := fmt.Sprintf("error: tool call of type %q is not supported; call one of the function tools", call.Type)
		return openai.ToolMessage(text, call.ID), nil
	}
	fn := call.AsFunction()
	res, err := tools.Dispatch(ctx, ts, fn.Function.Name, json.RawMessage(fn.Function.Arguments))
	return openai.ToolMessage(res.Text, call.ID), err
}

// DispatchResponses runs a Responses function call
// (ResponseOutputItemUnion.AsFunctionCall()) and returns the
// function_call_output input item that answers it.
func DispatchResponses(ctx context.Context, ts []tools.Tool, call responses.ResponseFunctionToolCall) (responses.ResponseInputItemUnionParam, error) {
	res, err := tools.Dispatch(ctx, ts, call.Name, json.RawMessage(call.Arguments))
	item := responses.ResponseInputItemParamOfFunctionCallOutput(res.Text)
	item.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	return item, err
}
