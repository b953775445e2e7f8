// Package genai declares Runtime's code-execution tools (sdk/go/tools) with
// the official Google Gen AI Go SDK (google.golang.org/genai) and runs the
// model's function calls, as that SDK returns them, in a Runtime sandbox.
//
//	config := &genai.GenerateContentConfig{Tools: []*genai.Tool{runtimegenai.Tool()}}
//	resp, _ := client.Models.GenerateContent(ctx, model, contents, config)
//	var parts []*genai.Part
//	for _, call := range resp.FunctionCalls() {
//		fr, err := runtimegenai.Dispatch(ctx, ts, call)
//		parts = append(parts, &genai.Part{FunctionResponse: fr})
//	}
//	contents = append(contents, resp.Candidates[0].Content, genai.NewContentFromParts(parts, genai.RoleUser))
//
// As Gemini asks, the FunctionResponse's response has an "output" key, or
// an "error" key for an error Result. The returned error is non-nil only
// when Runtime itself failed (see tools.Tool.Execute); the response is
// still fit for the model.
package genai

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/genai"

	"withruntime.dev/runtime/sdk/go/tools"
)

// FunctionDeclarations returns the four tools' declarations, each schema
// given whole as parametersJsonSchema.
func FunctionDeclarations() []*genai.FunctionDeclaration {
	defs := tools.Definitions()
	out := make([]*genai.FunctionDeclaration, len(defs))
	for i, d := range defs {
		var schema map[string]any
		if err := json.Unmarshal(d.InputSchema, &schema); err != nil {
			// The SDK's schemas are constant, valid JSON objects.
			panic(fmt.Sprintf("runtime genai: schema of %s: %v", d.Name, err))
		}
		out[i] = &genai.FunctionDeclaration{Name: d.Name, Description: d.Description, ParametersJsonSchema: schema}
	}
	return out
}

// Tool returns one genai.Tool declaring the four tools.
func Tool() *genai.Tool {
	return &genai.Tool{FunctionDeclarations: FunctionDeclarations()}
}

// Dispatch runs a function call of a Gemini answer
// (GenerateContentResponse.FunctionCalls()[i], or Part.FunctionCall) and
// returns the FunctionResponse that answers it: response {"output": text},
// or {"error": text} for an error Result.
func Dispatch(ctx context.Context, ts []tools.Tool, call *genai.FunctionCall) (*genai.FunctionResponse, error) {
	if call == nil {
		return &genai.FunctionResponse{Response: map[string]any{"error": "error: no function call"}}, nil
	}
	args := json.RawMessage("{}")
	if call.Args != nil {
		b, err := json.Marshal(call.Args)
		if err != nil {
			return &genai.FunctionResponse{ID: call.ID, Name: call.Name, Response: map[string]any{"error": "error: arguments are not JSON: " + err.Error()}}, nil
		}
		args = b
	}
	res, err := tools.Dispatch(ctx, ts, call.Name, args)
	key := "output"
	if res.IsError {
		key = "error"
	}
	return &genai.FunctionResponse{ID: call.ID, Name: call.Name, Response: map[string]any{key: res.Text}}, err
}

// DispatchPart is Dispatch with the FunctionResponse wrapped in a Part, as
// it goes into the next request's Content.
func DispatchPart(ctx context.Context, ts []tools.Tool, call *genai.FunctionCall) (*genai.Part, error) {
	fr, err := Dispatch(ctx, ts, call)
	return &genai.Part{FunctionResponse: fr}, err
}
