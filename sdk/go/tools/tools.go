// Package tools gives a language model a code-execution tool: four tools
// bound to one Runtime sandbox, each with a name, a description written for
// the model, a JSON Schema for its arguments, and a function that runs it.
//
//	sbx, _ := withruntime.Create(ctx, withruntime.Options{})
//	defer sbx.Close()
//	ts := tools.ForSandbox(sbx)
//	// declare ts to the model (see OpenAIChat, Anthropic, Gemini), then for
//	// each tool call the model makes:
//	res, err := tools.Dispatch(ctx, ts, call.Name, call.Arguments)
//	// give res.Text back to the model; err is for the program (the
//	// sandbox is gone, the server is unreachable)
//
// The tools are runtime_exec {command, cwd, timeoutSeconds},
// runtime_read_file {path}, runtime_write_file {path, content} and
// runtime_list_files {path}. Their schemas are flat objects with
// additionalProperties false and every property required, without $ref,
// oneOf, const, type arrays or format, so OpenAI strict function calling
// (Chat Completions and Responses), Anthropic tools, Gemini
// parametersJsonSchema and MCP all accept them as they are. Properties with
// a default take a sentinel ("" or 0) meaning "the default"; a caller may
// also leave them out.
//
// Relative paths resolve under /workspace. Output is capped (see
// MaxOutputBytes, MaxReadBytes, MaxListEntries): the head and the tail are
// kept, cut on UTF-8 boundaries, with a marker saying how many bytes were
// cut from the middle. A command's exit code is always in the result, and a
// command that fails is a result the model sees, never a Go error.
//
// runtime_exec runs a command on pipes, never on a terminal: a model reads
// text, and a terminal's output is a screen being drawn (escape sequences,
// redrawn lines, echoed input) with no end but the program's, which one
// tool result cannot hold. An agent that must drive an interactive program
// opens a terminal with Sandbox.CreateTerminal and decides what of the
// screen its model sees; a command that only needs isatty runs under
// `script -qec CMD /dev/null` inside runtime_exec.
//
// Arguments are untrusted: invalid JSON, a missing essential field, a
// mistyped or unknown field come back as a Result with IsError set and a
// message that says what to fix, and nothing reaches the sandbox
// unchecked. Execute never panics.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	withruntime "withruntime.dev/runtime/sdk/go"
)

// Tool names.
const (
	ExecName      = "runtime_exec"
	ReadFileName  = "runtime_read_file"
	WriteFileName = "runtime_write_file"
	ListFilesName = "runtime_list_files"
)

// Limits of the tools' results and arguments. Sizes are in bytes of UTF-8
// text unless said otherwise.
const (
	// MaxOutputBytes caps each of stdout and stderr in a runtime_exec
	// result (16 KiB): the first and last halves are kept.
	MaxOutputBytes = 16 << 10
	// MaxReadBytes caps the text of a file in a runtime_read_file result
	// (32 KiB): the first and last halves are kept.
	MaxReadBytes = 32 << 10
	// MaxReadBinaryBytes caps the bytes of a binary (non-UTF-8) file shown
	// base64-encoded by runtime_read_file (12 KiB, 16 KiB once encoded):
	// the head only.
	MaxReadBinaryBytes = 12 << 10
	// MaxReadScanBytes is the largest file runtime_read_file reads through
	// to find its tail (64 MiB); of a larger file only the head is shown.
	MaxReadScanBytes = 64 << 20
	// MaxListEntries caps the entries in a runtime_list_files result.
	MaxListEntries = 500
	// DefaultTimeoutSeconds is runtime_exec's timeout when timeoutSeconds
	// is 0; MaxTimeoutSeconds the largest it accepts.
	DefaultTimeoutSeconds = withruntime.DefaultExecTimeoutSeconds
	MaxTimeoutSeconds     = 1800
	// MaxCommandBytes, MaxPathBytes and MaxContentBytes bound the
	// arguments: a command line, a path, a file's content (runtime_write_file).
	MaxCommandBytes = 256 << 10
	MaxPathBytes    = 4096
	MaxContentBytes = 8 << 20
)

// Tool is one tool bound to a sandbox.
type Tool struct {
	// Name is the tool's name, such as "runtime_exec".
	Name string
	// Description tells the model what the tool does, where paths
	// resolve and the limits.
	Description string
	// InputSchema is the JSON Schema of the tool's arguments.
	InputSchema json.RawMessage
	// Execute runs one call with the model's arguments (a JSON object).
	//
	// The Result is always meant for the model, including when the error
	// is non-nil. The error is non-nil only when Runtime itself failed:
	// the sandbox is gone (withruntime.ErrLeaseEnded,
	// withruntime.ErrSandboxStopped), the server is unreachable or failed,
	// or ctx ended. Invalid arguments, a missing file and a failed command
	// are Results with a nil error (IsError set for the first two).
	Execute func(ctx context.Context, args json.RawMessage) (Result, error)
}

// Result is the outcome of one tool call.
type Result struct {
	// Text is what to give the model.
	Text string `json:"text"`
	// IsError says the call could not be carried out (invalid arguments,
	// no such file, the sandbox is gone); Text says why and what to do. A
	// command that ran and exited non-zero is not an error: its exit code
	// is in Text.
	IsError bool `json:"isError"`
	// Data is the same result as a value for programs, or nil: *ExecOutput,
	// *ReadOutput, *WriteOutput, *ListOutput or *RunCodeOutput.
	Data any `json:"data,omitempty"`
	// Images are the images the call produced (runtime_run_code's charts),
	// checked; give them to providers that take images in tool results
	// (AnthropicResultBlocks, OpenAIResponsesResultParts, GeminiParts).
	// Text names each one.
	Images []Image `json:"images,omitempty"`
}

// Definition is a tool's declaration without a sandbox: enough to tell a
// model about the tools before any sandbox exists.
type Definition struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// Definitions returns the four tools' declarations, in the order
// runtime_exec, runtime_read_file, runtime_write_file, runtime_list_files.
func Definitions() []Definition {
	return definitions(specs)
}

func definitions(specs []spec) []Definition {
	out := make([]Definition, len(specs))
	for i, s := range specs {
		out[i] = Definition{Name: s.name, Description: s.description, InputSchema: json.RawMessage(s.schema)}
	}
	return out
}

// SandboxFunc returns the sandbox a tool call runs in. It is called once
// per call, so it can create a sandbox on first use (as the MCP server
// does) or replace one whose lease ended.
type SandboxFunc func(ctx context.Context) (*withruntime.Sandbox, error)

// ForSandbox binds the four tools to sbx.
func ForSandbox(sbx *withruntime.Sandbox) []Tool {
	return Bind(func(context.Context) (*withruntime.Sandbox, error) { return sbx, nil })
}

// Bind binds the four tools to the sandbox that get returns at each call.
// An error from get becomes an error Result (and is returned as the error).
func Bind(get SandboxFunc) []Tool {
	return bind(get, specs)
}

func bind(get SandboxFunc, specs []spec) []Tool {
	out := make([]Tool, len(specs))
	for i, s := range specs {
		s := s
		out[i] = Tool{
			Name: s.name, Description: s.description, InputSchema: json.RawMessage(s.schema),
			Execute: func(ctx context.Context, args json.RawMessage) (res Result, err error) {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("tools: %s panicked: %v\n%s", s.name, p, debug.Stack())
						res = errorResult("internal error in %s; the call was not completed", s.name)
					}
				}()
				a, err := decodeArgs(args, s.fields)
				if err != nil {
					return errorResult("invalid arguments for %s: %v. Expected arguments: %s", s.name, err, s.example), nil
				}
				if s.check != nil {
					if msg := s.check(a); msg != "" {
						return errorResult("%s", msg), nil
					}
				}
				sbx, err := get(ctx)
				if err != nil {
					return sandboxErrorResult(err), err
				}
				return s.run(ctx, sbx, a)
			},
		}
	}
	return out
}

// Find returns the tool named name.
func Find(ts []Tool, name string) (Tool, bool) {
	for _, t := range ts {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// Dispatch runs the tool named name with args. An unknown name is an error
// Result naming the tools there are (with a nil error: the model should
// see it).
func Dispatch(ctx context.Context, ts []Tool, name string, args json.RawMessage) (Result, error) {
	t, ok := Find(ts, name)
	if !ok {
		names := make([]string, len(ts))
		for i, t := range ts {
			names[i] = t.Name
		}
		return errorResult("there is no tool %q; the tools are %s", name, strings.Join(names, ", ")), nil
	}
	return t.Execute(ctx, args)
}

func errorResult(format string, args ...any) Result {
	return Result{Text: "error: " + fmt.Sprintf(format, args...), IsError: true}
}

// apiResult turns an error from the sandbox into a Result. Errors the model
// can fix (no such file, a directory where a file was wanted) come back
// with a nil error; the sandbox being gone or the server failing also
// returns the error, for the program.
// hint, if not empty, is added to a not-found message.
func apiResult(err error, hint string) (Result, error) {
	var ae *withruntime.APIError
	if errors.As(err, &ae) {
		switch ae.Status {
		case 404:
			if hint != "" {
				return errorResult("%s (%s)", ae.Message, hint), nil
			}
			return errorResult("%s", ae.Message), nil
		case 400, 403, 409, 413, 507:
			return errorResult("%s", ae.Message), nil
		}
	}
	return sandboxErrorResult(err), err
}

func sandboxErrorResult(err error) Result {
	switch {
	case errors.Is(err, withruntime.ErrLeaseEnded), errors.Is(err, withruntime.ErrSandboxStopped):
		return errorResult("the sandbox is no longer running (%v); its files are gone", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errorResult("the call was cancelled before it finished")
	}
	return errorResult("the sandbox could not be reached: %v", err)
}
