// Package dockerfile builds templates from a Dockerfile: the common subset
// (FROM an image or an existing template, RUN, ENV, WORKDIR, USER, COPY and
// ADD from the build context, ARG), parsed with moby/buildkit's parser. RUN
// steps run in a real sandbox; what they change is captured from inside as a
// tar and applied, as a hostile layer, by the image package's flattener.
package dockerfile

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"

	"withruntime.dev/runtime/internal/errs"
)

// MaxDockerfileBytes caps a Dockerfile (1 MiB).
const MaxDockerfileBytes = 1 << 20

// Instruction is one supported instruction of a Dockerfile.
type Instruction struct {
	// Cmd is the instruction, upper case: RUN, ENV, WORKDIR, USER, COPY,
	// ADD or ARG.
	Cmd string
	// Line is its first line in the Dockerfile.
	Line int
	// Original is its text as written.
	Original string
	// Args are its arguments: RUN's command line (one element, shell form)
	// or argv (JSON form); ENV's key, value pairs; ARG's "NAME" or
	// "NAME=default" words; COPY/ADD's sources then destination; WORKDIR's
	// and USER's one word. Not yet expanded.
	Args []string
	// JSON says RUN, COPY or ADD used the JSON (exec) form.
	JSON bool
	// Chown is COPY/ADD's --chown value, if any.
	Chown string
	// Chmod is COPY/ADD's --chmod mode (octal, such as 0755), or -1: the
	// files keep the context's modes.
	Chmod int64
}

// File is a parsed Dockerfile.
type File struct {
	// From is FROM's argument (an image reference or a template name), with
	// the ARGs declared before FROM expanded.
	From     string
	FromLine int
	// Steps are the instructions after FROM, in order.
	Steps []Instruction
	// MetaArgs are the ARGs before FROM ("NAME" or "NAME=default").
	MetaArgs []string
	// Cmd is the last CMD, nil when there is none: the template's start
	// command (StartCommand), which its sandboxes run in the background
	// from a warm snapshot (template.Start). It runs after the build, not
	// during it.
	Cmd *Instruction
	lex *shell.Lex
}

// unsupported says why an instruction is refused.
var unsupported = map[string]string{
	"ENTRYPOINT":  "a sandbox runs the commands its API calls ask for, and a template's one start command is CMD; write the whole command in CMD (CMD [\"/entrypoint.sh\", \"serve\"]) or remove it",
	"EXPOSE":      "sandboxes take no inbound connections; remove it",
	"VOLUME":      "a sandbox's volumes are named by its create (volumes: [{name, path}]), not by its template; remove it",
	"HEALTHCHECK": "the sandbox runtime checks its own agent; remove it",
	"ONBUILD":     "remove it",
	"SHELL":       "RUN uses /bin/sh -c; write the shell into the RUN line (RUN [\"bash\", \"-c\", \"...\"])",
	"STOPSIGNAL":  "remove it",
	"LABEL":       "templates carry no labels; remove it",
	"MAINTAINER":  "remove it",
}

// Parse reads a Dockerfile. Errors wrap errs.Invalid and name the line: a
// syntax error, an instruction that is not supported (by name), a flag that
// is not supported, several FROMs (multi-stage builds are not supported),
// heredocs.
func Parse(r io.Reader) (*File, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxDockerfileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxDockerfileBytes {
		return nil, errs.New(errs.Invalid, "the Dockerfile is over %d bytes", MaxDockerfileBytes)
	}
	res, err := parser.Parse(bytes.NewReader(data))
	if err != nil {
		return nil, errs.New(errs.Invalid, "Dockerfile: %v", err)
	}
	f := &File{lex: shell.NewLex(res.EscapeToken)}
	for _, n := range res.AST.Children {
		cmd := strings.ToUpper(n.Value)
		bad := func(format string, args ...any) error {
			return errs.New(errs.Invalid, "Dockerfile line %d (%s): %s", n.StartLine, strings.TrimSpace(n.Original), fmt.Sprintf(format, args...))
		}
		if len(n.Heredocs) > 0 {
			return nil, bad("heredocs are not supported; write the file with COPY or the command with RUN")
		}
		var args []string
		for a := n.Next; a != nil; a = a.Next {
			args = append(args, a.Value)
		}
		if why, ok := unsupported[cmd]; ok {
			return nil, bad("%s is not supported: %s", cmd, why)
		}
		in := Instruction{Cmd: cmd, Line: n.StartLine, Original: n.Original, Args: args, JSON: n.Attributes["json"], Chmod: -1}
		for _, fl := range n.Flags {
			name, val, _ := strings.Cut(strings.TrimPrefix(fl, "--"), "=")
			switch {
			case (cmd == "COPY" || cmd == "ADD") && name == "chown":
				in.Chown = val
			case (cmd == "COPY" || cmd == "ADD") && name == "chmod":
				m, err := strconv.ParseInt(val, 8, 32)
				if err != nil || m < 0 || m > 0o7777 {
					return nil, bad("--chmod=%s: give an octal mode from 0 to 7777, such as 0755", val)
				}
				in.Chmod = m
			case cmd == "FROM" && name == "platform" && (val == "linux/amd64" || val == "$BUILDPLATFORM" || val == "$TARGETPLATFORM"):
			default:
				return nil, bad("the flag %s of %s is not supported", fl, cmd)
			}
		}
		switch cmd {
		case "FROM":
			if f.From != "" {
				return nil, bad("only one FROM is supported (multi-stage builds are not)")
			}
			if len(args) != 1 {
				return nil, bad("FROM takes one image or template name (FROM ... AS ... is for multi-stage builds, which are not supported)")
			}
			from, err := f.expand(args[0], metaEnv(f.MetaArgs, nil, f.lex))
			if err != nil || from == "" {
				return nil, bad("cannot expand %q: %v", args[0], err)
			}
			f.From, f.FromLine = from, n.StartLine
			continue
		case "ARG":
			if len(args) == 0 {
				return nil, bad("ARG needs a name")
			}
			if f.From == "" {
				f.MetaArgs = append(f.MetaArgs, args...)
				continue
			}
		case "RUN":
			if len(args) == 0 {
				return nil, bad("RUN needs a command")
			}
		case "CMD":
			if len(args) == 0 || (len(args) == 1 && strings.TrimSpace(args[0]) == "") {
				return nil, bad("CMD needs a command (the template's start command)")
			}
			if f.From == "" {
				return nil, bad("CMD comes before FROM; a Dockerfile starts with FROM (ARGs may come before it)")
			}
			f.Cmd = &in // the last one counts, as in Docker
			continue
		case "ENV":
			if len(args) == 0 || len(args)%3 != 0 {
				return nil, bad("ENV needs NAME=value pairs")
			}
			var kv []string
			for i := 0; i < len(args); i += 3 {
				kv = append(kv, args[i], args[i+1])
			}
			in.Args = kv
		case "WORKDIR", "USER":
			if len(args) != 1 {
				return nil, bad("%s takes one argument", cmd)
			}
		case "COPY", "ADD":
			if len(args) < 2 {
				return nil, bad("%s needs a source and a destination", cmd)
			}
		default:
			return nil, bad("%s is not a Dockerfile instruction Runtime supports (supported: FROM, RUN, ENV, WORKDIR, USER, COPY, ADD, ARG, CMD)", cmd)
		}
		if f.From == "" {
			return nil, bad("%s comes before FROM; a Dockerfile starts with FROM (ARGs may come before it)", cmd)
		}
		f.Steps = append(f.Steps, in)
	}
	if f.From == "" {
		return nil, errs.New(errs.Invalid, "the Dockerfile has no FROM")
	}
	return f, nil
}

// StartCommand is CMD as the shell command line a template's start runs:
// its shell form as written (the shell expands it when it runs, as Docker's
// does), its JSON form's words quoted for the shell. "" without CMD.
func (f *File) StartCommand() string {
	if f.Cmd == nil {
		return ""
	}
	if !f.Cmd.JSON {
		return strings.TrimSpace(strings.Join(f.Cmd.Args, " "))
	}
	q := make([]string, len(f.Cmd.Args))
	for i, a := range f.Cmd.Args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// shellQuote quotes s as one word for /bin/sh.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// expand expands $VAR and ${VAR} in word and removes its quotes, as
// Dockerfile instructions do.
func (f *File) expand(word string, env map[string]string) (string, error) {
	out, _, err := f.lex.ProcessWord(word, envGetter(env))
	return out, err
}

// metaEnv returns the values of ARG words ("NAME" or "NAME=default"), a
// build argument given for a NAME winning over its default.
func metaEnv(words []string, buildArgs map[string]string, lex *shell.Lex) map[string]string {
	env := map[string]string{}
	for _, w := range words {
		name, def, hasDef := strings.Cut(w, "=")
		if v, ok := buildArgs[name]; ok {
			env[name] = v
		} else if hasDef {
			v, _, err := lex.ProcessWord(def, envGetter(env))
			if err == nil {
				env[name] = v
			}
		}
	}
	return env
}

// envGetter adapts a map to shell.EnvGetter.
type envGetter map[string]string

func (e envGetter) Get(k string) (string, bool) { v, ok := e[k]; return v, ok }

func (e envGetter) Keys() []string {
	keys := make([]string, 0, len(e))
	for k := range e {
		keys = append(keys, k)
	}
	return keys
}
