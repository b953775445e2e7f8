// Package withruntime is the Go SDK of Runtime, a self-hosted gVisor
// sandbox server for running a language model's code. It needs only the
// standard library.
//
// A program creates a sandbox, runs commands and moves files in it, and
// closes it:
//
//	sbx, err := withruntime.Create(ctx, withruntime.Options{TimeoutSeconds: 600})
//	if err != nil { ... }
//	defer sbx.Close()
//	sbx.Files().WriteFile(ctx, "hello.py", []byte("print(6 * 7)\n"))
//	res, err := sbx.Exec(ctx, withruntime.ExecRequest{Command: "python3 hello.py"})
//	// res.ExitCode == 0, res.Stdout == "42\n"
//
// # Configuration
//
// Create, Connect and List find the server with NewClient: WITHRUNTIME_URL
// and WITHRUNTIME_API_KEY, else the CLI's config file
// (~/.config/withruntime/config.json), else an error wrapping
// ErrNotConfigured. Unlike the CLI, the SDK does not start an embedded
// server: on a single host, run `withruntime serve` and point
// WITHRUNTIME_URL at it, or pass WithBaseURL and WithAPIKey to NewClient.
//
// # Errors
//
// Every error answer of the server is an *APIError with the HTTP status,
// a stable code and a message that says what to fix; errors.Is matches it
// against the sentinels (ErrNotFound, ErrLeaseEnded, ...). A command that
// exits non-zero is not an error: Exec returns its ExitCode in the result.
//
// # Network, secrets, keys and usage
//
// Options.Network sets a sandbox's network policy (loopback only by
// default), which Sandbox.Network reads and Sandbox.SetNetwork changes
// while it runs. Client.SetSecret stores a write-only secret that a sandbox
// created with Options.Secrets sees as a placeholder, swapped for the
// value by the egress proxy in HTTPS requests to the secret's hosts.
// Client.CreateKey, ListKeys and RevokeKey manage API keys, with an
// optional daily spending limit; Client.Usage reports CPU-seconds,
// GiB-seconds and micro-dollars (1 USD = 1,000,000) per day, sandbox or
// key; Options.MaxCostMicros refuses a sandbox whose lease could cost more
// (ErrCostCap).
//
// # Templates
//
// Client.CreateTemplate makes a template from a container image (a
// registry image the server pulls, or a `docker save` tarball or OCI
// layout on this machine, which the SDK uploads), Client.BuildTemplate
// from a Dockerfile and its build context; ListTemplates, GetTemplate and
// DeleteTemplate manage them. Options.Template starts a sandbox from one.
//
// # Wire types
//
// The request and answer bodies (ExecRequest, ExecResult, SandboxInfo,
// FileInfo, ...) are aliases of package withruntime.dev/runtime/sdk/go/wire,
// the one Go copy of api/openapi.yaml's schemas, which the server imports
// too: a value of either name is the same type.
//
// # Tools for models
//
// Package withruntime.dev/runtime/sdk/go/tools binds the four model tools
// (runtime_exec, runtime_read_file, runtime_write_file, runtime_list_files)
// to a Sandbox, with JSON Schemas that OpenAI, Anthropic, Gemini and MCP
// accept as they are.
package withruntime
