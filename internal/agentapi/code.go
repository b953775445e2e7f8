package agentapi

import "withruntime.dev/runtime/sdk/go/wire"

// The code interpreter: contexts, each a Jupyter kernel (ipykernel) that
// keeps its variables from one call to the next, and code run in them.
// Sandboxes of the code-interpreter template have the kernels; in others
// these routes answer 501 not_implemented.
//
//	POST   /contexts         CreateContextRequest -> 201 Context (kernel started)
//	GET    /contexts                              -> 200 ContextList
//	GET    /contexts/{contextId}                  -> 200 Context
//	DELETE /contexts/{contextId}                  -> 204 (kernel stopped)
//	POST   /contexts/{contextId}/restart          -> 200 Context (a new kernel; state lost)
//	PATCH  /contexts/{contextId} UpdateContextRequest -> 200 Context (its kernel moved)
//	POST   /code             RunCodeRequest       -> 200 Execution, or an NDJSON stream of
//	                                                 CodeEvent when Accept: application/x-ndjson

// Defaults and limits of the code interpreter.
const (
	// DefaultContextID names the context a RunCodeRequest without a
	// ContextID runs in; it is created on first use.
	DefaultContextID = wire.DefaultContextID
	// LanguagePython is the default language (wire lists the others).
	LanguagePython = wire.LanguagePython
	// DefaultCodeTimeoutSeconds applies when a RunCodeRequest sets none.
	DefaultCodeTimeoutSeconds = wire.DefaultCodeTimeoutSeconds
	// MaxContexts is how many contexts a sandbox may have at once (each is
	// a Python process of 50-100 MiB).
	MaxContexts = 16
	// MaxLogBytes caps each of stdout and stderr in a collected Execution:
	// past it the head and tail are kept around a marker entry
	// "[... N bytes omitted ...]". Streams are not capped.
	MaxLogBytes = 1 << 20
	// MaxResultBytes caps the results of one collected Execution together
	// (their MIME data); a result past it is replaced by one whose
	// text/plain says how large it was.
	MaxResultBytes = 32 << 20
	// CodeNotImplemented is the error code (501) of the code routes in a
	// sandbox whose template has no kernels.
	CodeNotImplemented = "not_implemented"
)

// The code interpreter's public bodies are package wire's.
type (
	CreateContextRequest = wire.CreateContextRequest
	// UpdateContextRequest is the body of PATCH /contexts/{id}.
	UpdateContextRequest = wire.UpdateContextRequest
	Context              = wire.CodeContext
	ContextList          = wire.ContextList
	RunCodeRequest       = wire.RunCodeRequest
	Execution            = wire.Execution
	Logs                 = wire.ExecutionLogs
	Result               = wire.ExecutionResult
	ExecutionError       = wire.ExecutionError
	CodeEvent            = wire.CodeEvent
)

// InterruptGraceSeconds is how long a kernel has to stop after the
// interrupt of a timeout before it is killed and restarted.
const InterruptGraceSeconds = 2

// The Java kernel: where the code-interpreter template installs it
// (internal/template/kernels.go) and how the agent starts it
// (internal/agent/languages.go).
const (
	// JavaKernelDir holds the kernel's jar, JJava's Jupyter library and
	// its dependencies (the classpath is JavaKernelDir/*), and the CDS
	// archive jshell.jsa the build recorded.
	JavaKernelDir = "/usr/local/share/withruntime/java-kernel"
	// JavaKernelClass is the kernel's main class; its one argument is the
	// connection file (or --check: run one cell and exit).
	JavaKernelClass = "dev.withruntime.kernel.JShellKernel"
	// JavaKernelFlags are the kernel JVM's flags, the build's check and the
	// agent's kernels alike (so the CDS archive matches). Measured on a
	// 2-core host, a kernel up and two cells run: the JVM's defaults (G1,
	// tiered compilation, a heap sized to the host) answered kernel_info
	// after 2.8 s and held 219 MB resident; the serial collector, C1 only
	// (TieredStopAtLevel=1) and a heap that starts at 16 MB and gives back
	// what it does not use: 1.35 s and 117 MB. The CDS archive of the
	// classes a kernel loads (written at build time, 12 MB) takes a
	// one-cell run (--check) from 1.18 s to 0.86 s. In a sandbox (gVisor)
	// the first cell, kernel start included, took 3.7-6.2 s and the kernel
	// held 263 MB resident after eight cells. The slf4j property
	// quiets the library's note that it has no logger.
	JavaKernelFlags = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xms16m -XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30 -Dslf4j.internal.verbosity=ERROR"
)
