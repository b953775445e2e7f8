package tools

import (
	"context"
	"encoding/json"
)

// The declarations and results below are the JSON shapes each provider's
// API takes, built with the standard library only: marshal them into the
// request body, or convert them to a provider SDK's own types.

// OpenAIChatTool is one entry of an OpenAI Chat Completions request's
// "tools": {"type": "function", "function": {...}}.
type OpenAIChatTool struct {
	Type     string         `json:"type"`
	Function OpenAIFunction `json:"function"`
}

// OpenAIFunction is the function of an OpenAIChatTool. Strict is true: the
// schemas meet strict mode's rules, so the model's arguments always match.
type OpenAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

// OpenAIResponsesTool is one entry of an OpenAI Responses request's
// "tools": {"type": "function", "name", "description", "parameters",
// "strict"}.
type OpenAIResponsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

// AnthropicTool is one entry of an Anthropic Messages request's "tools".
type AnthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// GeminiFunctionDeclaration is one entry of a Gemini request's
// tools[].functionDeclarations, with the schema as parametersJsonSchema.
type GeminiFunctionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
}

// OpenAIChat declares ts for OpenAI Chat Completions.
func OpenAIChat(ts []Tool) []OpenAIChatTool {
	out := make([]OpenAIChatTool, len(ts))
	for i, t := range ts {
		out[i] = OpenAIChatTool{Type: "function", Function: OpenAIFunction{Name: t.Name, Description: t.Description, Parameters: t.InputSchema, Strict: true}}
	}
	return out
}

// OpenAIResponses declares ts for the OpenAI Responses API.
func OpenAIResponses(ts []Tool) []OpenAIResponsesTool {
	out := make([]OpenAIResponsesTool, len(ts))
	for i, t := range ts {
		out[i] = OpenAIResponsesTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: t.InputSchema, Strict: true}
	}
	return out
}

// Anthropic declares ts for Anthropic's Messages API.
func Anthropic(ts []Tool) []AnthropicTool {
	out := make([]AnthropicTool, len(ts))
	for i, t := range ts {
		out[i] = AnthropicTool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
	}
	return out
}

// Gemini declares ts for Gemini (one Tool's functionDeclarations).
func Gemini(ts []Tool) []GeminiFunctionDeclaration {
	out := make([]GeminiFunctionDeclaration, len(ts))
	for i, t := range ts {
		out[i] = GeminiFunctionDeclaration{Name: t.Name, Description: t.Description, ParametersJSONSchema: t.InputSchema}
	}
	return out
}

// OpenAIChatToolMessage is the Chat Completions message that answers a
// tool call: {"role": "tool", "tool_call_id", "content"}. The API has no
// error flag: an error Result's Text starts with "error: ".
type OpenAIChatToolMessage struct {
	Role       string `json:"role"`
	ToolCallID string `json:"tool_call_id"`
	Content    string `json:"content"`
}

// OpenAIResponsesOutput is the Responses input item that answers a
// function call: {"type": "function_call_output", "call_id", "output"}.
type OpenAIResponsesOutput struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Output string `json:"output"`
}

// AnthropicToolResult is the content block that answers a tool_use block:
// {"type": "tool_result", "tool_use_id", "content", "is_error"}.
type AnthropicToolResult struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	Content   string `json:"content"`
	IsError   bool   `json:"is_error,omitempty"`
}

// GeminiFunctionResponse is the part that answers a functionCall:
// {"functionResponse": {"name", "id", "response": {"output"} or {"error"}}}.
type GeminiFunctionResponse struct {
	FunctionResponse GeminiFunctionResponseBody `json:"functionResponse"`
}

// GeminiFunctionResponseBody is the body of a GeminiFunctionResponse. As
// Gemini asks, Response has an "output" key, or an "error" key for an
// error Result.
type GeminiFunctionResponseBody struct {
	ID       string         `json:"id,omitempty"`
	Name     string         `json:"name"`
	Response map[string]any `json:"response"`
}

// OpenAIChatResult answers the Chat Completions tool call callID with r.
func (r Result) OpenAIChatResult(callID string) OpenAIChatToolMessage {
	return OpenAIChatToolMessage{Role: "tool", ToolCallID: callID, Content: r.Text}
}

// OpenAIResponsesResult answers the Responses function call callID with r.
func (r Result) OpenAIResponsesResult(callID string) OpenAIResponsesOutput {
	return OpenAIResponsesOutput{Type: "function_call_output", CallID: callID, Output: r.Text}
}

// AnthropicResult answers the tool_use block toolUseID with r.
func (r Result) AnthropicResult(toolUseID string) AnthropicToolResult {
	return AnthropicToolResult{Type: "tool_result", ToolUseID: toolUseID, Content: r.Text, IsError: r.IsError}
}

// GeminiResult answers the functionCall of tool name (and id, if the call
// had one) with r.
func (r Result) GeminiResult(name, id string) GeminiFunctionResponse {
	key := "output"
	if r.IsError {
		key = "error"
	}
	return GeminiFunctionResponse{FunctionResponse: GeminiFunctionResponseBody{ID: id, Name: name, Response: map[string]any{key: r.Text}}}
}

// Tool calls as each API returns them. Unmarshal the model's answer into
// these (or copy the fields over from a provider SDK's types) and pass them
// to the matching Dispatch function, which returns the API's result shape.
// As with Tool.Execute, the error is non-nil only when Runtime itself
// failed; the result is still fit for the model.

// OpenAIChatToolCall is one entry of a Chat Completions assistant message's
// "tool_calls"; Function.Arguments is a JSON object encoded as a string.
type OpenAIChatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// OpenAIResponsesFunctionCall is a Responses output item of type
// "function_call"; Arguments is a JSON object encoded as a string.
type OpenAIResponsesFunctionCall struct {
	Type      string `json:"type"`
	ID        string `json:"id,omitempty"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// AnthropicToolUse is a "tool_use" content block of a Messages answer;
// Input is a JSON object.
type AnthropicToolUse struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// GeminiFunctionCall is the "functionCall" of a Gemini answer's part; Args
// is a JSON object.
type GeminiFunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// DispatchOpenAIChat runs a Chat Completions tool call and returns the
// "tool" message that answers it.
func DispatchOpenAIChat(ctx context.Context, ts []Tool, call OpenAIChatToolCall) (OpenAIChatToolMessage, error) {
	res, err := Dispatch(ctx, ts, call.Function.Name, json.RawMessage(call.Function.Arguments))
	return res.OpenAIChatResult(call.ID), err
}

// DispatchOpenAIResponses runs a Responses function call and returns the
// function_call_output item that answers it.
func DispatchOpenAIResponses(ctx context.Context, ts []Tool, call OpenAIResponsesFunctionCall) (OpenAIResponsesOutput, error) {
	res, err := Dispatch(ctx, ts, call.Name, json.RawMessage(call.Arguments))
	return res.OpenAIResponsesResult(call.CallID), err
}

// DispatchAnthropic runs a tool_use block and returns the tool_result block
// that answers it (is_error set for an error Result).
func DispatchAnthropic(ctx context.Context, ts []Tool, block AnthropicToolUse) (AnthropicToolResult, error) {
	res, err := Dispatch(ctx, ts, block.Name, block.Input)
	return res.AnthropicResult(block.ID), err
}

// DispatchGemini runs a functionCall and returns the functionResponse part
// that answers it (an "error" key for an error Result).
func DispatchGemini(ctx context.Context, ts []Tool, call GeminiFunctionCall) (GeminiFunctionResponse, error) {
	res, err := Dispatch(ctx, ts, call.Name, call.Args)
	return res.GeminiResult(call.Name, call.ID), err
}
