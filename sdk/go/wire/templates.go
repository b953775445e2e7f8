package wire

import "time"

// ContentTypeTar is the Content-Type of a POST /v1/templates body that
// uploads an image as a `docker save` tarball (or a Dockerfile build's
// context, with the Dockerfile's parameters in the query).
const ContentTypeTar = "application/x-tar"

// Template is a root filesystem sandboxes start from
// (CreateSandboxRequest.Template).
type Template struct {
	// Name is what CreateSandboxRequest.Template names.
	Name string `json:"name"`
	// CreatedAt is when it was built (UTC).
	CreatedAt time.Time `json:"createdAt"`
	// SizeBytes is its root filesystem's size on disk, in bytes.
	SizeBytes int64 `json:"sizeBytes"`
	// Origin says where a template made from an image or a Dockerfile came
	// from; absent for one built from a built-in recipe (base).
	Origin *TemplateOrigin `json:"origin,omitempty"`
	// Private says the template is the key's that made it: no other key
	// sees it, boots it, builds from it or deletes it (absent: shared by
	// every key of the server).
	Private bool `json:"private,omitempty"`
	// Start, when present, makes the template warm: what its sandboxes
	// run before they are handed out (code-interpreter's: its kernel).
	Start *TemplateStart `json:"start,omitempty"`
}

// TemplateStart makes a template warm: the server boots a sandbox of it,
// starts Command in the background (and, with Kernel, the default code
// context's kernel with numpy, pandas and matplotlib imported), runs
// ReadyCommand until it exits 0, and saves that sandbox; every create of
// the template starts from the save, so the first command finds the
// program running.
type TemplateStart struct {
	// Command is a shell command line started in the background as the
	// sandbox user in /workspace, with the template's environment (at
	// most 16 KiB); a Dockerfile's CMD gives it.
	Command string `json:"command,omitempty"`
	// ReadyCommand is a shell command line run the same way, again and
	// again, until it exits 0 (at most 16 KiB); absent: ready as soon as
	// Command started.
	ReadyCommand string `json:"readyCommand,omitempty"`
	// ReadyTimeoutSeconds bounds the wait for ReadyCommand, in seconds
	// (1-600; absent or 0: 60). A check that has not passed by then fails
	// the build, or the create, with its last output.
	ReadyTimeoutSeconds int64 `json:"readyTimeoutSeconds,omitempty"`
	// Kernel starts the default code context's kernel with the usual
	// imports done (a template with ipykernel).
	Kernel bool `json:"kernel,omitempty"`
}

// TemplateOrigin is where a template made from an image came from.
type TemplateOrigin struct {
	// Image is the reference it was made from, or an upload's label.
	Image string `json:"image"`
	// Digest is the image manifest's digest ("sha256:...").
	Digest string `json:"digest,omitempty"`
	// Env is the image's environment ("KEY=value"); the template's
	// sandboxes start with it (a create's env wins).
	Env []string `json:"env,omitempty"`
	// WorkingDir is the image's working directory, recorded only: commands
	// start in /workspace.
	WorkingDir string `json:"workingDir,omitempty"`
	// Shell runs ExecRequest.Command: "/bin/bash", "/bin/sh", or "" when
	// the image has no shell (then only ExecRequest.Argv works).
	Shell string `json:"shell"`
}

// TemplateList is the body of GET /v1/templates.
type TemplateList struct {
	Templates []Template `json:"templates"`
	// Note, when set, says why the list may be incomplete (a Kubernetes
	// server whose registry refuses its catalog API lists only the
	// templates it has used; GET /v1/templates/NAME finds any). Also in
	// the Withruntime-Templates-Note header.
	Note string `json:"note,omitempty"`
}

// CreateTemplateRequest is the JSON body of POST /v1/templates.
type CreateTemplateRequest struct {
	// Name is the new template's name: 1-63 of a-z, 0-9, '.', '_', '-',
	// starting with a letter or digit. It must not be taken.
	Name string `json:"name"`
	// FromImage is an image in a registry the server can reach,
	// "[HOST[:PORT]/]REPO[:TAG|@sha256:DIGEST]", linux/amd64. The server
	// pulls it with the registry credentials of the user it runs as.
	// Images on the caller's disk are uploaded instead (Content-Type
	// ContentTypeTar): the server never reads paths on a caller's behalf.
	FromImage string `json:"fromImage"`
	// Private makes the template the key's only (Template.Private); a key
	// with a daily spending limit makes only private ones.
	Private bool `json:"private,omitempty"`
	// Start, when set, makes the template warm (TemplateStart); the build
	// then runs it once and fails when its ready check does not pass.
	Start *TemplateStart `json:"start,omitempty"`
}

// TemplateEvent is one line of the NDJSON stream of POST /v1/templates.
type TemplateEvent struct {
	// Type is "step" (a build step begins, or ends when Done), "output"
	// (what a Dockerfile's RUN printed, in Data), "template" (the build
	// succeeded: the last event, with Template), "error" (it failed and
	// left nothing behind: the last event, with Error) or "heartbeat"
	// (EventHeartbeat; skip it).
	Type string `json:"type"`
	// Step says what the step does, such as "pulling and extracting layer
	// 2/3 (sha256:...), 12.0 MiB compressed" (step events).
	Step string `json:"step,omitempty"`
	// Done says the step ended (step events).
	Done bool `json:"done,omitempty"`
	// Data is what a RUN step printed, stdout and stderr together, as UTF-8
	// text (output events).
	Data string `json:"data,omitempty"`
	// ElapsedSeconds is the time since the build started, in seconds.
	ElapsedSeconds float64 `json:"elapsedSeconds,omitempty"`
	// Template is the new template (template events).
	Template *Template `json:"template,omitempty"`
	// Error says why the build failed (error events).
	Error *ErrorDetail `json:"error,omitempty"`
}
