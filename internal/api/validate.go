package api

// The rules of each request beyond its shape: numeric ranges (bounds, with
// the maximum named when refused) and names (no control characters). The
// sandbox manager keeps its own checks for callers inside the process; these
// answer HTTP callers first, and cover numbers too large to decode at all.

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/sdk/go/wire"
)

// Documented ranges that are not server limits (api/openapi.yaml).
const (
	// minCPU, minMemoryMiB and minDiskMiB are the smallest sandbox the
	// manager makes.
	minCPU       = 0.05
	minMemoryMiB = 64
	minDiskMiB   = 16
	// maxMicros bounds every amount of money in a request (1e15 µ$, one
	// billion dollars): far past any real cap, and far from overflowing
	// the sums the server makes with it.
	maxMicros = 1_000_000_000_000_000
	// maxExecTimeoutSeconds bounds an exec's timeout and a wait's (about
	// 31 years; the agent's own limit).
	maxExecTimeoutSeconds = 1e9
	// maxPid is the largest process id (a Linux pid is a positive int32).
	maxPid = 1<<31 - 1
	// maxMetadataKey and maxMetadataValue bound a sandbox's labels, in bytes.
	maxMetadataKey, maxMetadataValue = 256, 4096
	// maxQuotaMiB and maxQuotaCount bound a key's quotas (1 EiB of disk; a
	// million sandboxes): far past any host, far from overflowing sums.
	maxQuotaMiB, maxQuotaCount = 1 << 40, 1_000_000
)

// The server's own requests, as the types their rules hang on (the wire
// types are package wire's, so they carry no server rules).
type (
	createSandboxRequest CreateSandboxRequest
	setTimeoutRequest    SetTimeoutRequest
	createKeyRequest     CreateKeyRequest
	networkPolicy        NetworkPolicy
)

func (req *createSandboxRequest) bounds(l sandbox.Limits) []bound {
	return []bound{
		intBound("timeoutSeconds", &req.TimeoutSeconds, 1, int64(l.MaxTimeout/time.Second),
			fmt.Sprintf("the default, %d", int64(l.DefaultTimeout/time.Second)), "seconds (the server's maximum lease)"),
		floatBound("cpu", &req.CPU, minCPU, l.MaxCPU, fmt.Sprintf("the default, %g", l.DefaultCPU), "vCPUs"),
		intBound("memoryMiB", &req.MemoryMiB, minMemoryMiB, l.MaxMemoryMiB, fmt.Sprintf("the default, %d", l.DefaultMemoryMiB), "MiB"),
		intBound("diskMiB", &req.DiskMiB, minDiskMiB, l.MaxDiskMiB, fmt.Sprintf("the default, %d", l.DefaultDiskMiB), "MiB"),
		intBound("maxCostMicros", &req.MaxCostMicros, 1, maxMicros, "no cap", "micro-dollars"),
	}
}

func (req *createSandboxRequest) check() error {
	if err := checkName("template", req.Template); err != nil {
		return err
	}
	if err := checkName("snapshot", req.Snapshot); err != nil {
		return err
	}
	if err := checkEnv("env", req.Env); err != nil {
		return err
	}
	for k, v := range req.Metadata {
		if len(k) > maxMetadataKey || len(v) > maxMetadataValue {
			return badRequest("metadata %q: keys are at most %d bytes and values at most %d", k, maxMetadataKey, maxMetadataValue)
		}
		if err := checkName("metadata key", k); err != nil {
			return err
		}
		if err := checkName(fmt.Sprintf("metadata value of %q", k), v); err != nil {
			return err
		}
	}
	for _, name := range req.Secrets {
		if err := checkName("secret name", name); err != nil {
			return err
		}
	}
	if len(req.Volumes) > sandbox.MaxVolumesPerSandbox {
		return badRequest("volumes: a sandbox may mount at most %d volumes; got %d", sandbox.MaxVolumesPerSandbox, len(req.Volumes))
	}
	for _, v := range req.Volumes {
		if err := sandbox.CheckVolumeName(v.Name); err != nil {
			return err
		}
		if err := checkNoNUL("volume path", v.Path); err != nil {
			return err
		}
	}
	if req.Network != nil {
		return (*networkPolicy)(req.Network).check()
	}
	return nil
}

func (req *setTimeoutRequest) bounds(l sandbox.Limits) []bound {
	return []bound{intBound("timeoutSeconds", &req.TimeoutSeconds, 1, int64(l.MaxTimeout/time.Second), "", "seconds (the server's maximum lease)")}
}

func (req *createKeyRequest) bounds() []bound {
	const def = "the server's default for a tenant key, none for an administrator's"
	return []bound{
		intBound("dailyLimitMicros", &req.DailyLimitMicros, 1, maxMicros, "no limit", "micro-dollars per UTC day"),
		intBound("diskQuotaMiB", &req.DiskQuotaMiB, 1, maxQuotaMiB, def, "MiB"),
		intBound("pausedQuota", &req.PausedQuota, 1, maxQuotaCount, def, "paused sandboxes"),
		intBound("sandboxesQuota", &req.SandboxesQuota, 1, maxQuotaCount, def, "sandboxes"),
	}
}

func (req *createKeyRequest) check() error { return checkName("key name", req.Name) }

func (p *networkPolicy) check() error {
	for _, list := range [][]string{p.Allow, p.Deny} {
		for _, entry := range list {
			if err := checkName("network entry", entry); err != nil {
				return err
			}
		}
	}
	return nil
}

// The agent's requests, checked by the server before it forwards them: the
// agent runs inside the sandbox, so only these checks stand between a
// caller and the host; the agent's own protect the caller.

// execRequest is an exec or a background process.
type execRequest agentapi.ExecRequest

func (req *execRequest) bounds() []bound {
	return []bound{
		floatBound("timeoutSeconds", &req.TimeoutSeconds, 0, maxExecTimeoutSeconds, "",
			"seconds (0: the default, 120 s for exec and none for a background process)"),
		intsBound("maxOutputBytes", &req.MaxOutputBytes, 1, agentapi.MaxMaxOutputBytes,
			fmt.Sprintf("the default, %d", agentapi.DefaultMaxOutputBytes), "bytes"),
	}
}

func (req *execRequest) check() error {
	if req.Pty != nil {
		return badRequest(`pty is only for background processes: start the command with POST /v1/sandboxes/{id}/processes and connect to its terminal (GET .../processes/{pid}/terminal)`)
	}
	return req.checkCommand()
}

// processRequest is a background process: an exec that may ask for a
// terminal.
type processRequest execRequest

func (req *processRequest) bounds() []bound { return (*execRequest)(req).bounds() }

func (req *processRequest) check() error {
	if p := req.Pty; p != nil {
		if p.Cols < 1 || p.Cols > wire.MaxPtyCols || p.Rows < 1 || p.Rows > wire.MaxPtyRows {
			return badRequest("pty must have cols from 1 to %d and rows from 1 to %d, got cols %d, rows %d", wire.MaxPtyCols, wire.MaxPtyRows, p.Cols, p.Rows)
		}
		if req.Stdin != "" || req.StdinOpen {
			return badRequest(`a process on a terminal (pty) takes its input from the terminal: leave out "stdin" and "stdinOpen"`)
		}
	}
	return (*execRequest)(req).checkCommand()
}

// checkCommand checks what an exec and a background process share.
func (req *execRequest) checkCommand() error {
	if (req.Command == "") == (len(req.Argv) == 0) {
		return badRequest(`set exactly one of "command" (a shell command line, run with bash -c) or "argv" (a program and its arguments, run without a shell)`)
	}
	if err := checkNoNUL("command", req.Command); err != nil {
		return err
	}
	for i, a := range req.Argv {
		if err := checkNoNUL(fmt.Sprintf("argv[%d]", i), a); err != nil {
			return err
		}
	}
	if err := checkNoNUL("cwd", req.Cwd); err != nil {
		return err
	}
	switch req.User {
	case "", "user", "root":
	default:
		// Only the documented users: a template or root inside a sandbox
		// may add accounts, but the API's contract has these two.
		return badRequest(`user %q is not one a command may run as; use "user" (the default, uid 1000) or "root"`, req.User)
	}
	return checkEnv("env", req.Env)
}

// resizeRequest is a terminal's new size (POST .../processes/{pid}/resize).
type resizeRequest wire.PtySize

func (req *resizeRequest) bounds() []bound {
	return []bound{
		intsBound("cols", &req.Cols, 1, wire.MaxPtyCols, "", "columns"),
		intsBound("rows", &req.Rows, 1, wire.MaxPtyRows, "", "rows"),
	}
}

type killRequest agentapi.KillRequest

func (req *killRequest) check() error { return checkName("signal", req.Signal) }

type mkdirRequest agentapi.MkdirRequest

func (req *mkdirRequest) check() error { return checkNoNUL("path", req.Path) }

type renameRequest agentapi.RenameRequest

func (req *renameRequest) check() error {
	if err := checkNoNUL("from", req.From); err != nil {
		return err
	}
	return checkNoNUL("to", req.To)
}

// queryRule checks one query parameter's value.
type queryRule func(name, value string) error

func pathParam(name, v string) error { return checkNoNUL(name, v) }

// metadataParam checks a write's file metadata: a JSON object of strings
// within agentapi.CheckMetadata's rules.
func metadataParam(name, v string) error {
	if _, err := agentapi.ParseMetadata(v); err != nil {
		return badRequest("%s: %v", name, err)
	}
	return nil
}

// cursorParam checks a listing's cursor (the next of an earlier page):
// base64url of a clean absolute path, at most agentapi.ListMaxCursorBytes.
func cursorParam(name, v string) error {
	if v == "" {
		return nil // the first page
	}
	if _, err := agentapi.ParseListCursor(v); err != nil {
		return badRequest("%s: %v; pass the next of the page before, or no %s for the first page", name, err, name)
	}
	return nil
}

func boolParam(name, v string) error {
	if _, err := strconv.ParseBool(v); err != nil {
		return badRequest("%s=%q is not a boolean; use true or false", name, v)
	}
	return nil
}

func numberParam(min, max float64, unit string) queryRule {
	return func(name, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil && f == 0 { // a range error still returns ±Inf, refused below
			return badRequest("%s=%q is not a number; give %s from %s to %s", name, v, unit, num(min), num(max))
		}
		b := floatBound(name, &f, min, max, "", unit)
		return b.check()
	}
}

func intParam(min, max int64, unit string) queryRule {
	return func(name, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < min || n > max {
			return badRequest("%s must be a whole number from %d to %d %s; got %q", name, min, max, unit, v)
		}
		return nil
	}
}

// checkQuery refuses a query that does not parse, repeats a parameter, or
// has one rules does not list, and checks each value.
func checkQuery(raw string, rules map[string]queryRule) error {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return badRequest("malformed query string: %v", err)
	}
	for name, values := range q {
		rule, ok := rules[name]
		if !ok {
			return badRequest("unknown query parameter %q; this route takes %s", name, paramList(rules))
		}
		if len(values) > 1 {
			return badRequest("query parameter %q is given %d times; give it once", name, len(values))
		}
		if err := rule(name, values[0]); err != nil {
			return err
		}
	}
	return nil
}

func paramList(rules map[string]queryRule) string {
	if len(rules) == 0 {
		return "none"
	}
	names := make([]string, 0, len(rules))
	for n := range rules {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(quoteAll(names), ", ")
}
