// Package wire holds the JSON bodies of Runtime's public HTTP API: every
// request and answer schema of api/openapi.yaml, once, as Go types. It is
// the one Go copy of the document's components/schemas: the server
// (withruntime.dev/runtime/internal/api, internal/agentapi,
// internal/compat/e2b) and the Go SDK (withruntime.dev/runtime/sdk/go)
// both import it, so a field exists in one place. It needs nothing but the
// standard library, so the SDK stays dependency-free (as moby's api module
// and Nomad's api package are importable without their daemons).
//
// Each exported struct is named after its schema and has exactly the
// schema's properties: the same JSON names, omitempty exactly where the
// schema does not require the property of an answer, and each enum's
// values named in the field's comment. A test in the server's module
// (internal/api, TestWireMatchesSpec) holds every exported struct here to
// the document, field by field, and fails on a struct without a schema and
// a schema without a struct; add a field to both in the same change.
//
// Not here, because they are not public: the host-only routes of the
// in-sandbox agent (internal/agentapi: ConfigureRequest, the agent's
// Health and Usage, the port upgrade) and server-side rules (bounds,
// defaults taken from the server's configuration). The SDK's own types
// (Options, ListFilter, the Sandbox handle) are not wire shapes either.
//
// Times are RFC 3339 in UTC; sizes are bytes unless the name says MiB
// (2^20 bytes); money is micro-dollars (1 USD = 1,000,000); durations are
// seconds unless the name says Ms (milliseconds).
package wire
