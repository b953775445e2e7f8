package template

import (
	"fmt"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/errs"
)

// Start is what a warm template's sandboxes run before they are handed out:
// a start command left running in the background, a ready check polled
// until it passes, and for templates with Jupyter kernels the default code
// context's kernel. The server runs it once in a sandbox of the template,
// saves that sandbox as the template's warm image, and restores every
// create of the template from it (sandbox/warm.go), so a server, a
// database or a kernel is already up at a sandbox's first command.
//
// It is kept in template.json (Info.Start). A recipe's start is the
// recipe's in this binary (it changes no file of the root filesystem, so
// a new one needs no rebuild).
type Start struct {
	// Command is a shell command line (run with the template's shell, as
	// the sandbox user, in /workspace, with the template's environment)
	// started in the background; "" for none.
	Command string `json:"command,omitempty"`
	// ReadyCommand is a shell command line run (as Command) until it exits
	// 0; "" means ready as soon as Command started.
	ReadyCommand string `json:"readyCommand,omitempty"`
	// ReadyTimeoutSeconds bounds the wait for ReadyCommand, in seconds (0:
	// DefaultReadyTimeout).
	ReadyTimeoutSeconds int64 `json:"readyTimeoutSeconds,omitempty"`
	// Kernel starts the default code context's kernel with numpy, pandas
	// and matplotlib imported (a template with ipykernel, such as
	// code-interpreter).
	Kernel bool `json:"kernel,omitempty"`
}

// DefaultReadyTimeout is how long a ready check may take to pass when
// Start.ReadyTimeoutSeconds is 0.
const DefaultReadyTimeout = 60 * time.Second

// MaxReadyTimeout is the longest Start.ReadyTimeoutSeconds (10 minutes).
const MaxReadyTimeout = 10 * time.Minute

// maxStartCommand caps Start.Command and Start.ReadyCommand (bytes).
const maxStartCommand = 16 << 10

// ReadyTimeout is s's ready timeout with its default.
func (s *Start) ReadyTimeout() time.Duration {
	if s == nil || s.ReadyTimeoutSeconds <= 0 {
		return DefaultReadyTimeout
	}
	return time.Duration(s.ReadyTimeoutSeconds) * time.Second
}

// IsZero says s asks for nothing (a template that is not warm).
func (s *Start) IsZero() bool {
	return s == nil || (s.Command == "" && s.ReadyCommand == "" && !s.Kernel)
}

// Check returns nil when s can be a template's start, and otherwise an
// errs.Invalid error that says what is wrong. A nil or empty s is valid
// (no start).
func (s *Start) Check() error {
	if s == nil {
		return nil
	}
	for _, c := range []struct{ name, v string }{{"start command", s.Command}, {"ready command", s.ReadyCommand}} {
		if len(c.v) > maxStartCommand {
			return errs.New(errs.Invalid, "the %s is over %d bytes; put a long script in a file of the template and run that", c.name, maxStartCommand)
		}
		if strings.ContainsRune(c.v, 0) {
			return errs.New(errs.Invalid, "the %s contains a NUL byte", c.name)
		}
		if c.v != "" && strings.TrimSpace(c.v) == "" {
			return errs.New(errs.Invalid, "the %s is only blanks; give a command or leave it out", c.name)
		}
	}
	if s.ReadyTimeoutSeconds < 0 || time.Duration(s.ReadyTimeoutSeconds)*time.Second > MaxReadyTimeout {
		return errs.New(errs.Invalid, "readyTimeoutSeconds must be between 1 and %d (0: %d); got %d",
			int64(MaxReadyTimeout/time.Second), int64(DefaultReadyTimeout/time.Second), s.ReadyTimeoutSeconds)
	}
	if s.ReadyTimeoutSeconds != 0 && s.ReadyCommand == "" {
		return errs.New(errs.Invalid, "readyTimeoutSeconds bounds the ready check, and there is none; give a ready command or leave readyTimeoutSeconds out")
	}
	return nil
}

// Normal returns s checked, or nil when it asks for nothing.
func (s *Start) Normal() (*Start, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	if s.IsZero() {
		return nil, nil
	}
	c := *s
	return &c, nil
}

// String is s for logs and messages.
func (s *Start) String() string {
	if s.IsZero() {
		return "none"
	}
	var parts []string
	if s.Kernel {
		parts = append(parts, "the default code context's kernel")
	}
	if s.Command != "" {
		parts = append(parts, fmt.Sprintf("start command %q", s.Command))
	}
	if s.ReadyCommand != "" {
		parts = append(parts, fmt.Sprintf("ready check %q (%s)", s.ReadyCommand, s.ReadyTimeout()))
	}
	return strings.Join(parts, ", ")
}

// WithStart is a Create option that gives the new template a start (nil
// or empty: none). It must have passed Check.
func WithStart(s *Start) CreateOption {
	return func(info *Info) {
		if !s.IsZero() {
			c := *s
			info.Start = &c
		}
	}
}

// StartOf returns template name's start: nil for a template that is not
// warm. Errors as Get.
func (s *Store) StartOf(name string) (*Start, error) {
	info, err := s.Get(name)
	if err != nil {
		return nil, err
	}
	return info.Start, nil
}

// recipeStart fills info.Start from its recipe for a template built from
// one (a recipe's start is this binary's, not the build's).
func (s *Store) recipeStart(info *Info) {
	if info.Origin != nil {
		return
	}
	recipes := s.recipes
	if recipes == nil {
		recipes = builtinRecipes
	}
	r, ok := recipes[info.Name]
	if !ok {
		return
	}
	info.Start = nil
	if !r.start.IsZero() {
		c := *r.start
		info.Start = &c
	}
}
