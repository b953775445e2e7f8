package e2b

// E2B's template steps as a Dockerfile for Runtime's builder
// (internal/template/dockerfile), and the checks that refuse, by name, what
// that builder cannot do.

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"withruntime.dev/runtime/internal/template/image"
)

// buildSpec is the body of POST /v2/templates/{templateID}/builds/{buildID}
// (E2B's TemplateBuildStartV2).
type buildSpec struct {
	FromImage         string          `json:"fromImage"`
	FromTemplate      string          `json:"fromTemplate"`
	FromImageRegistry json.RawMessage `json:"fromImageRegistry"`
	Force             bool            `json:"force"`
	Steps             []buildStep     `json:"steps"`
	StartCmd          string          `json:"startCmd"`
	ReadyCmd          string          `json:"readyCmd"`
}

// buildStep is E2B's TemplateStep.
type buildStep struct {
	Type        string   `json:"type"`
	Args        []string `json:"args"`
	FilesHash   string   `json:"filesHash"`
	Force       bool     `json:"force"`
	ForceUpload *bool    `json:"forceUpload"`
}

// maxSteps caps a build's steps.
const maxSteps = 1000

// defaultBaseImage is what E2B's SDKs build from when no from_* is called
// (Template() alone, from_base_image()): E2B's base image, which here is
// Runtime's base template (the host has no E2B images; both are Debian
// with Python, Node.js and the user "user").
var defaultBaseImages = map[string]bool{"e2bdev/base": true, "e2bdev/base:latest": true, "docker.io/e2bdev/base": true,
	"docker.io/e2bdev/base:latest": true}

// The build's defaults, as E2B's: steps run as "user" in /home/user
// (E2B's SDKs turn a Dockerfile's defaults, root in /, into explicit
// steps).
const (
	buildUser    = "user"
	buildWorkdir = "/home/user"
)

// contextFiles is where a COPY step's uploaded files are in the build
// context: contextFiles + HASH + "/" + their path in the upload.
const contextFiles = "files/"

var (
	hashPattern   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	envName       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	chownPattern  = regexp.MustCompile(`^(root|user|[0-9]{1,10})(:(root|user|[0-9]{1,10}))?$`)
	octalMode     = regexp.MustCompile(`^[0-7]{1,4}$`)
	userStepNames = "root or user (uid 0 or 1000)"
)

// stepError is a step E2B asked for that cannot be built, by its number
// (1 for the first step; 0 for the template's base).
type stepError struct {
	step int
	what string
	msg  string
}

func (e *stepError) Error() string {
	if e.step == 0 {
		return e.msg
	}
	return fmt.Sprintf("step %d (%s): %s", e.step, e.what, e.msg)
}

// translated is a build as Runtime's builder takes it.
type translated struct {
	dockerfile string
	// steps maps a Dockerfile line to its E2B step (0: the base).
	steps map[int]int
	// hashes are the COPY steps' upload hashes, each once, in order.
	hashes []string
	// hashStep is the first COPY step of each hash.
	hashStep map[string]int
	// desc says what each E2B step does, for the build's log: "RUN ls"
	// (index 0 is the base).
	desc []string
	// startCmd and readyCmd are the template's start command and ready
	// check (set_start_cmd, set_ready_cmd) as Runtime's start runs them:
	// wrapped by startContext in the steps' last user, working directory
	// and environment; "" for none.
	startCmd, readyCmd string
}

// e2bReadyTimeout is how long E2B waits for a template's ready check
// (seconds): ten minutes, Runtime's template.MaxReadyTimeout.
const e2bReadyTimeout = 600

// startContext wraps cmd so that Runtime's start (which runs a command as
// the sandbox user in /workspace) runs it as E2B's does: in the working
// directory and environment the template's steps ended with, and as root
// when they ended as root (through sudo, which E2B's base image and
// Runtime's have for "user"; an image without it fails the start saying
// so). "" stays "".
func startContext(cmd, workdir, user string, env [][2]string) string {
	if strings.TrimSpace(cmd) == "" {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cd %s || exit 1\n", shellWord(workdir))
	for _, kv := range env {
		fmt.Fprintf(&b, "export %s=%s\n", kv[0], shellWord(kv[1]))
	}
	b.WriteString(cmd)
	if user != "root" {
		return b.String()
	}
	return "command -v sudo >/dev/null 2>&1 || { echo 'the template ends as root (set_user), and Runtime runs its start command as root through sudo, which this image lacks' >&2; exit 1; }\n" +
		"exec sudo -n -- /bin/sh -c " + shellWord("if [ -x /bin/bash ]; then exec /bin/bash -c \"$0\"; fi; exec /bin/sh -c \"$0\"") + " " + shellWord(b.String())
}

// shellWord quotes s as one word for a POSIX shell.
func shellWord(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// checkUser returns the user a step runs as: root or user.
func checkUser(u string) (string, error) {
	switch u {
	case "root", "0":
		return "root", nil
	case "user", "1000":
		return "user", nil
	}
	return "", fmt.Errorf("user %q: Runtime runs build steps as %s only", u, userStepNames)
}

// quoted is s as one Dockerfile word that the builder expands back to s
// exactly: double quotes, with the characters they treat specially
// escaped. Newlines cannot be written into a Dockerfile line.
func quoted(s string) (string, error) {
	if strings.ContainsAny(s, "\n\r\x00") {
		return "", fmt.Errorf("%q holds a newline or NUL, which Runtime's builder cannot take here", s)
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`)
	return `"` + r.Replace(s) + `"`, nil
}

// runLine is a RUN instruction running cmd with bash (or /bin/sh when the
// image has no bash), as the builder's shell form does; a command the
// shell form cannot carry (several lines, a trailing backslash) goes in
// the JSON form through a small wrapper that picks the same shell.
func runLine(cmd string) string {
	if !strings.ContainsAny(cmd, "\n\r") && !strings.HasSuffix(cmd, `\`) {
		return "RUN " + cmd
	}
	argv, _ := json.Marshal([]string{"/bin/sh", "-c", `if [ -x /bin/bash ]; then exec /bin/bash -c "$0"; fi; exec /bin/sh -c "$0"`, cmd})
	return "RUN " + string(argv)
}

// checkFrom returns what the build's FROM names: an image (fromImage), or a
// template (fromTemplate, already resolved to a Runtime template by the
// caller). It refuses what Runtime cannot pull.
func (b buildSpec) checkFrom() (string, error) {
	if len(b.FromImageRegistry) > 0 && string(b.FromImageRegistry) != "null" {
		return "", &stepError{msg: "fromImageRegistry (registry credentials given with the build: from_image(..., username, password), from_aws_registry, from_gcp_registry) is not supported by Runtime: the server pulls with the registry credentials of the user it runs as (its docker config); log in there and leave the credentials out"}
	}
	if b.FromImage != "" && b.FromTemplate != "" {
		return "", &stepError{msg: "give fromImage or fromTemplate, not both"}
	}
	if b.FromImage == "" && b.FromTemplate == "" {
		return "", &stepError{msg: "give fromImage or fromTemplate: what the template starts from"}
	}
	if b.FromTemplate != "" {
		return "", nil
	}
	ref := strings.TrimSpace(b.FromImage)
	if defaultBaseImages[ref] {
		return "", nil
	}
	if image.IsLocal(ref) {
		return "", &stepError{msg: fmt.Sprintf("fromImage %q is a path: the server reads no files on a caller's behalf; push the image to a registry the server can reach", ref)}
	}
	// E2B reads an image's name as Docker does ("ubuntu:22.04" is Docker's
	// public registry's library/ubuntu); Runtime's own builder wants the
	// registry named, so that a mistyped template name is not a pull from
	// the internet. The facade writes the name out in full.
	if _, err := image.ParseSource(ref); err != nil {
		r, derr := name.ParseReference(ref)
		if derr != nil {
			return "", &stepError{msg: fmt.Sprintf("fromImage: %v", err)}
		}
		ref = r.Name()
	}
	return ref, nil
}

// translate turns b into a Dockerfile FROM from (a Runtime template, or an
// image reference), checking every step first: a step type Runtime's
// builder lacks, or arguments it cannot take, is a *stepError naming it.
func (b buildSpec) translate(from string) (translated, error) {
	for _, c := range []struct{ name, v string }{{"startCmd", b.StartCmd}, {"readyCmd", b.ReadyCmd}} {
		if strings.ContainsRune(c.v, 0) {
			return translated{}, &stepError{msg: c.name + " holds a NUL byte"}
		}
	}
	if len(b.Steps) > maxSteps {
		return translated{}, &stepError{msg: fmt.Sprintf("the template has %d steps; Runtime builds at most %d", len(b.Steps), maxSteps)}
	}
	if strings.ContainsAny(from, " \t\n\r") || from == "" {
		return translated{}, &stepError{msg: fmt.Sprintf("%q cannot be built from", from)}
	}
	t := translated{steps: map[int]int{}, hashStep: map[string]int{}}
	var lines []string
	emit := func(step int, l string) {
		lines = append(lines, l)
		t.steps[len(lines)] = step
	}
	t.desc = append(t.desc, "FROM "+from)
	emit(0, "FROM "+from)
	emit(0, "USER "+buildUser)
	emit(0, "WORKDIR "+buildWorkdir)
	cur, wd := buildUser, buildWorkdir
	var env [][2]string
	for i, st := range b.Steps {
		n := i + 1
		what := st.Type
		for _, a := range st.Args {
			if a != "" {
				what += " " + a
			}
		}
		if len(what) > 80 {
			what = what[:77] + "..."
		}
		bad := func(format string, args ...any) error {
			return &stepError{step: n, what: what, msg: fmt.Sprintf(format, args...)}
		}
		t.desc = append(t.desc, what)
		switch st.Type {
		case "RUN":
			if len(st.Args) < 1 || len(st.Args) > 2 || strings.TrimSpace(st.Args[0]) == "" {
				return translated{}, bad("RUN takes a command and optionally a user")
			}
			if strings.ContainsRune(st.Args[0], 0) {
				return translated{}, bad("the command holds a NUL byte")
			}
			as := cur
			if len(st.Args) == 2 && st.Args[1] != "" {
				u, err := checkUser(st.Args[1])
				if err != nil {
					return translated{}, bad("%v", err)
				}
				as = u
			}
			if as != cur {
				emit(n, "USER "+as)
			}
			emit(n, runLine(st.Args[0]))
			if as != cur {
				emit(n, "USER "+cur)
			}
		case "COPY":
			if len(st.Args) < 2 || len(st.Args) > 4 {
				return translated{}, bad("COPY takes a source, a destination, and optionally a user and a mode")
			}
			if !hashPattern.MatchString(st.FilesHash) {
				return translated{}, bad("filesHash %q is not a SHA-256 in lower-case hex", st.FilesHash)
			}
			src := st.Args[0]
			if src == "" || path.IsAbs(src) || strings.HasPrefix(path.Clean(src), "..") {
				return translated{}, bad("the source %q must be a path inside the template's file context", src)
			}
			if st.Args[1] == "" {
				return translated{}, bad("the destination is empty")
			}
			owner := cur
			if len(st.Args) > 2 && st.Args[2] != "" {
				if !chownPattern.MatchString(st.Args[2]) {
					return translated{}, bad("user %q: Runtime's builder gives copied files to %s, or to numeric ids (UID[:GID])", st.Args[2], userStepNames)
				}
				owner = st.Args[2]
			}
			flags := "--chown=" + owner
			if len(st.Args) > 3 && st.Args[3] != "" {
				if !octalMode.MatchString(st.Args[3]) {
					return translated{}, bad("mode %q: give an octal mode such as 0755", st.Args[3])
				}
				m, _ := strconv.ParseInt(st.Args[3], 8, 32)
				flags += fmt.Sprintf(" --chmod=%04o", m)
			}
			s, err := quoted(contextFiles + st.FilesHash + "/" + path.Clean(src))
			if err != nil {
				return translated{}, bad("the source %v", err)
			}
			d, err := quoted(st.Args[1])
			if err != nil {
				return translated{}, bad("the destination %v", err)
			}
			words, _ := json.Marshal([]string{s, d})
			emit(n, "COPY "+flags+" "+string(words))
			if _, ok := t.hashStep[st.FilesHash]; !ok {
				t.hashStep[st.FilesHash] = n
				t.hashes = append(t.hashes, st.FilesHash)
			}
		case "ENV":
			// E2B's environment variables are the build's only (its SDKs
			// say so): a Dockerfile's ARG, which RUN sees and sandboxes
			// do not.
			if len(st.Args) == 0 || len(st.Args)%2 != 0 {
				return translated{}, bad("ENV takes names and values in pairs")
			}
			for j := 0; j < len(st.Args); j += 2 {
				if !envName.MatchString(st.Args[j]) {
					return translated{}, bad("%q is not a variable name (letters, digits and '_', not starting with a digit)", st.Args[j])
				}
				v, err := quoted(st.Args[j+1])
				if err != nil {
					return translated{}, bad("the value of %s: %v", st.Args[j], err)
				}
				emit(n, "ARG "+st.Args[j]+"="+v)
				env = append(env, [2]string{st.Args[j], st.Args[j+1]})
			}
		case "WORKDIR":
			if len(st.Args) != 1 || st.Args[0] == "" {
				return translated{}, bad("WORKDIR takes one path")
			}
			d, err := quoted(st.Args[0])
			if err != nil {
				return translated{}, bad("the path %v", err)
			}
			emit(n, "WORKDIR "+d)
			wd = path.Join(wd, st.Args[0])
			if path.IsAbs(st.Args[0]) {
				wd = path.Clean(st.Args[0])
			}
		case "USER":
			if len(st.Args) != 1 {
				return translated{}, bad("USER takes one user")
			}
			u, err := checkUser(st.Args[0])
			if err != nil {
				return translated{}, bad("%v", err)
			}
			cur = u
			emit(n, "USER "+u)
		default:
			return translated{}, bad("the step type %q is not supported by Runtime's template builder (it builds RUN, COPY, ENV, WORKDIR and USER steps)", st.Type)
		}
	}
	t.dockerfile = strings.Join(lines, "\n") + "\n"
	t.startCmd = startContext(b.StartCmd, wd, cur, env)
	t.readyCmd = startContext(b.ReadyCmd, wd, cur, env)
	return t, nil
}
