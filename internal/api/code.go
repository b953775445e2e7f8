package api

import (
	"fmt"

	"withruntime.dev/runtime/internal/agentapi"
)

// The code interpreter's requests, checked before they are forwarded to
// the agent (see forward.go).

// runCodeRequest is POST .../code.
type runCodeRequest agentapi.RunCodeRequest

func (req *runCodeRequest) bounds() []bound {
	return []bound{
		floatBound("timeoutSeconds", &req.TimeoutSeconds, 0, maxExecTimeoutSeconds,
			fmt.Sprintf("the default, %d s", agentapi.DefaultCodeTimeoutSeconds), "seconds"),
	}
}

func (req *runCodeRequest) check() error {
	if err := checkNoNUL("code", req.Code); err != nil {
		return err
	}
	if err := checkName("contextId", req.ContextID); err != nil {
		return err
	}
	if err := checkName("language", req.Language); err != nil {
		return err
	}
	return checkEnv("env", req.Env)
}

// createContextRequest is POST .../contexts.
type createContextRequest agentapi.CreateContextRequest

// updateContextRequest is the body of PATCH .../contexts/{contextId}.
type updateContextRequest agentapi.UpdateContextRequest

func (req *updateContextRequest) check() error {
	if req.Cwd == "" {
		return badRequest("cwd is missing: say where the context's kernel is to work")
	}
	return checkNoNUL("cwd", req.Cwd)
}

func (req *createContextRequest) check() error {
	if err := checkName("language", req.Language); err != nil {
		return err
	}
	if err := checkName("user", req.User); err != nil {
		return err
	}
	if err := checkNoNUL("cwd", req.Cwd); err != nil {
		return err
	}
	return checkEnv("env", req.Env)
}
