package dockerfile

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/egress"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/store"
	"withruntime.dev/runtime/internal/template"
	"withruntime.dev/runtime/internal/template/image"
	"withruntime.dev/runtime/internal/template/rootfs"
)

// Sandboxes is what a build needs of the sandbox manager.
type Sandboxes interface {
	Create(ctx context.Context, p sandbox.CreateParams) (store.Sandbox, error)
	Destroy(ctx context.Context, id string) error
	AgentTransport(ctx context.Context, id string) (http.RoundTripper, error)
}

// Builder builds templates from Dockerfiles on one server.
type Builder struct {
	Sandboxes Sandboxes
	Store     *template.Store
	// Images configures FROM images (pull, caps) and the cap on what the
	// build's steps may add (Limits.MaxBytes).
	Images image.Options
}

// Params is one build.
type Params struct {
	// Name is the new template's name (not taken).
	Name string
	// Dockerfile is the parsed Dockerfile.
	Dockerfile *File
	// Context is the build context COPY and ADD read.
	Context Context
	// BuildArgs set ARGs.
	BuildArgs map[string]string
	// KeyID owns the build sandbox; FROM finds only the templates it may
	// use (template.Info.UsableBy).
	KeyID string
	// Owner, when set, is the key the new template is private to
	// (template.OwnedBy); "": shared.
	Owner string
	// Network is the RUN steps' network policy (nil: nothing reachable).
	Network *egress.Policy
	// MemoryMiB, DiskMiB and CPU size the build sandbox (0: 2048 MiB,
	// 8192 MiB and the server's default).
	MemoryMiB, DiskMiB int64
	CPU                float64
	// RunTimeout bounds each RUN (0: one hour).
	RunTimeout time.Duration
	// Start is the request's start for the template (its fields win over
	// the Dockerfile's CMD and FROM's start: see StartOf); nil: none.
	Start *template.Start
}

// StartOf is the start of a template built from f FROM a template whose
// start is from, with the request's req on top: FROM's start; CMD
// replaces its command (and its ready check, which was that command's);
// then each field req sets wins. The result is checked (errs.Invalid).
func StartOf(f *File, from, req *template.Start) (*template.Start, error) {
	if err := req.Check(); err != nil {
		return nil, err
	}
	var st template.Start
	if from != nil {
		st = *from
	}
	if cmd := f.StartCommand(); cmd != "" {
		st.Command, st.ReadyCommand, st.ReadyTimeoutSeconds = cmd, "", 0
	}
	if req != nil {
		if req.Command != "" {
			st.Command = req.Command
		}
		if req.ReadyCommand != "" {
			st.ReadyCommand, st.ReadyTimeoutSeconds = req.ReadyCommand, req.ReadyTimeoutSeconds
		}
		st.Kernel = st.Kernel || req.Kernel
	}
	return st.Normal()
}

// maxListing caps a path listing downloaded from the build sandbox.
const maxListing = 64 << 20

// Build runs the Dockerfile and makes the template. progress gets the steps
// (one per instruction); output gets what RUN steps print. A failing RUN is
// errs.Invalid with its exit code and last output. The build sandbox is
// destroyed and a FROM image imported for the build is deleted, whatever
// happens; a failed build leaves no template.
func (b *Builder) Build(ctx context.Context, p Params, progress func(template.Progress), output func(string)) (template.Info, error) {
	start := time.Now()
	step := func(name string) func() {
		if progress == nil {
			return func() {}
		}
		progress(template.Progress{Step: name, Elapsed: time.Since(start)})
		return func() { progress(template.Progress{Step: name, Elapsed: time.Since(start), Done: true}) }
	}
	if err := b.Store.CheckNew(p.Name); err != nil {
		return template.Info{}, err
	}
	f := p.Dockerfile

	// FROM: a template of this server, or an image imported for the build.
	from := f.From
	fromDone := step("FROM " + from)
	if _, err := b.Store.GetFor(from, p.KeyID); err != nil {
		if !errors.Is(err, template.ErrNotFound) && template.ValidName(from) == nil {
			return template.Info{}, err
		}
		if image.IsLocal(from) {
			return template.Info{}, errs.New(errs.Invalid, "FROM %s: name a template of this server or a registry image (paths are not read)", from)
		}
		src, err := image.ParseSource(from)
		if err != nil {
			return template.Info{}, fmt.Errorf("FROM %s is neither a template of this server nor an image: %w", from, err)
		}
		tmp := "build-" + randomHex(6)
		if _, err := image.Import(ctx, b.Store, tmp, src, b.Images, progress); err != nil {
			return template.Info{}, fmt.Errorf("FROM %s: %w", from, err)
		}
		defer func() { _ = b.Store.Delete(context.WithoutCancel(ctx), tmp, nil) }()
		from = tmp
	}
	fromInfo, err := b.Store.GetFor(from, p.KeyID)
	if err != nil {
		return template.Info{}, err
	}
	warm, err := StartOf(f, fromInfo.Start, p.Start)
	if err != nil {
		return template.Info{}, err
	}
	fromRoot, err := b.Store.RootFS(from)
	if err != nil {
		return template.Info{}, err
	}
	fromDone()

	// The build sandbox.
	done := step("starting the build sandbox")
	mem, disk := p.MemoryMiB, p.DiskMiB
	if mem == 0 {
		mem = 2048
	}
	if disk == 0 {
		disk = 8192
	}
	sb, err := b.Sandboxes.Create(ctx, sandbox.CreateParams{KeyID: p.KeyID, Template: from, TimeoutSeconds: 4 * 3600,
		CPU: p.CPU, MemoryMiB: mem, DiskMiB: disk, Network: p.Network,
		Metadata: map[string]string{"withruntime.build": p.Name}})
	if err != nil {
		return template.Info{}, fmt.Errorf("the build sandbox: %w", err)
	}
	defer func() { _ = b.Sandboxes.Destroy(context.WithoutCancel(ctx), sb.ID) }()
	rt, err := b.Sandboxes.AgentTransport(ctx, sb.ID)
	if err != nil {
		return template.Info{}, err
	}
	ag := newAgentClient(rt)
	if err := b.root(ctx, ag, startScript, "preparing the build"); err != nil {
		return template.Info{}, err
	}
	done()

	st := &state{env: map[string]string{}, args: map[string]string{}, user: "root", workdir: "/"}
	var fromEnv []string
	if fromInfo.Origin != nil {
		fromEnv = fromInfo.Origin.Env
	}
	for _, kv := range fromEnv {
		if k, v, ok := strings.Cut(kv, "="); ok {
			st.env[k] = v
			st.order = append(st.order, k)
		}
	}
	if _, ok := st.env["PATH"]; !ok {
		st.base = map[string]string{"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	}
	if o := fromInfo.Origin; o != nil && o.WorkingDir != "" {
		st.imageWorkdir = o.WorkingDir
	}
	for _, in := range f.Steps {
		label := fmt.Sprintf("%s (line %d)", oneLine(in.Original), in.Line)
		done := step(label)
		if err := b.step(ctx, ag, f, p, st, in, output); err != nil {
			return template.Info{}, fmt.Errorf("Dockerfile line %d (%s): %w", in.Line, oneLine(in.Original), err)
		}
		done()
	}

	// What the steps changed, from inside.
	done = step("capturing the changes")
	if err := b.root(ctx, ag, endScript, "capturing the changes"); err != nil {
		return template.Info{}, err
	}
	var before, after bytes.Buffer
	if err := ag.get(ctx, scratch+"/before", maxListing, &before); err != nil {
		return template.Info{}, err
	}
	if err := ag.get(ctx, scratch+"/after", maxListing, &after); err != nil {
		return template.Info{}, err
	}
	changes, err := tmpFile(b.Store.Dir)
	if err != nil {
		return template.Info{}, err
	}
	defer changes.Close()
	maxBytes := b.Images.Limits.MaxBytes
	if maxBytes <= 0 {
		maxBytes = image.DefaultMaxBytes
	}
	if err := ag.get(ctx, scratch+"/changes.tar", maxBytes, changes); err != nil {
		return template.Info{}, err
	}
	_ = b.Sandboxes.Destroy(context.WithoutCancel(ctx), sb.ID)
	done()

	// The template: FROM's files (hard links: templates are never
	// written), then the changes as a hostile layer.
	wh := whiteouts(before.Bytes(), after.Bytes())
	fill := func(ctx context.Context, dir string, step func(string) func()) (*template.Origin, error) {
		done := step("linking the files of " + f.From)
		cp := exec.CommandContext(ctx, "cp", "-a", "--link", fromRoot+"/.", dir+"/")
		if out, err := cp.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("copy %s: %v: %s", fromRoot, err, out)
		}
		done()
		done = step("applying the changes")
		root, err := rootfs.Open(dir)
		if err != nil {
			return nil, err
		}
		defer root.Close()
		fl := image.NewFlattener(root, b.Images.Limits)
		if err := fl.Apply(bytes.NewReader(wh), "the build's deletions"); err != nil {
			return nil, err
		}
		if err := fl.Apply(io.NewSectionReader(changes, 0, 1<<62), "the build's changes"); err != nil {
			return nil, err
		}
		done()
		done = step("making it bootable")
		shell, err := image.MakeBootable(root)
		if err != nil {
			return nil, errs.New(errs.Invalid, "the built image cannot be booted: %v", err)
		}
		done()
		origin := &template.Origin{Image: "Dockerfile, FROM " + f.From, Env: st.envList(), WorkingDir: st.finalWorkdir(), Shell: shell}
		if fromInfo.Origin != nil {
			origin.Digest = fromInfo.Origin.Digest
		}
		return origin, nil
	}
	offset := time.Since(start)
	return b.Store.Create(ctx, p.Name, fill, func(pr template.Progress) {
		if progress != nil {
			pr.Elapsed += offset
			progress(pr)
		}
	}, template.OwnedBy(p.Owner), template.WithStart(warm))
}

// state is what the instructions so far set.
type state struct {
	base         map[string]string // defaults under env (PATH)
	env          map[string]string // ENV, and the FROM image's
	order        []string          // env's keys in the order set
	args         map[string]string // ARGs after FROM
	user         string
	workdir      string
	workdirSet   bool
	imageWorkdir string
}

// vars is what $VAR expands to: ENV over ARG over the defaults.
func (s *state) vars() map[string]string {
	m := map[string]string{}
	for k, v := range s.base {
		m[k] = v
	}
	for k, v := range s.args {
		m[k] = v
	}
	for k, v := range s.env {
		m[k] = v
	}
	return m
}

func (s *state) envList() []string {
	var out []string
	for _, k := range s.order {
		out = append(out, k+"="+s.env[k])
	}
	return out
}

func (s *state) finalWorkdir() string {
	if s.workdirSet {
		return s.workdir
	}
	return s.imageWorkdir
}

// step runs one instruction.
func (b *Builder) step(ctx context.Context, ag *agentClient, f *File, p Params, st *state, in Instruction, output func(string)) error {
	expand := func(w string) (string, error) {
		out, err := f.expand(w, st.vars())
		if err != nil {
			return "", errs.New(errs.Invalid, "cannot expand %q: %v", w, err)
		}
		return out, nil
	}
	switch in.Cmd {
	case "ARG":
		for _, w := range in.Args {
			name, def, hasDef := strings.Cut(w, "=")
			if v, ok := p.BuildArgs[name]; ok {
				st.args[name] = v
			} else if hasDef {
				v, err := expand(def)
				if err != nil {
					return err
				}
				st.args[name] = v
			}
		}
	case "ENV":
		for i := 0; i+1 < len(in.Args); i += 2 {
			v, err := expand(in.Args[i+1])
			if err != nil {
				return err
			}
			k := in.Args[i]
			if _, ok := st.env[k]; !ok {
				st.order = append(st.order, k)
			}
			st.env[k] = v
		}
	case "USER":
		u, err := expand(in.Args[0])
		if err != nil {
			return err
		}
		u, _, _ = strings.Cut(u, ":")
		switch u {
		case "0":
			u = "root"
		case "1000":
			u = "user"
		}
		if strings.Trim(u, "0123456789") == "" {
			return errs.New(errs.Invalid, "USER %s: give a user name from the image's /etc/passwd (root, user, ...)", u)
		}
		st.user = u
	case "WORKDIR":
		d, err := expand(in.Args[0])
		if err != nil {
			return err
		}
		if !path.IsAbs(d) {
			d = path.Join(st.workdir, d)
		}
		st.workdir, st.workdirSet = path.Clean(d), true
		return b.rootArgv(ctx, ag, []string{"mkdir", "-p", "--", st.workdir})
	case "RUN":
		req := agentapi.ExecRequest{User: st.user, Cwd: st.workdir, Env: st.runEnv(),
			TimeoutSeconds: p.runTimeout().Seconds()}
		if in.JSON {
			req.Argv = in.Args
		} else {
			req.Command = in.Args[0]
		}
		tail := &tailBuffer{max: 4096}
		res, err := ag.run(ctx, req, func(s string) {
			tail.write(s)
			if output != nil {
				output(s)
			}
		})
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return errs.New(errs.Invalid, "RUN failed with exit code %d; its last output:\n%s", res.ExitCode, tail.String())
		}
	case "COPY", "ADD":
		var words []string
		for _, a := range in.Args {
			w, err := expand(a)
			if err != nil {
				return err
			}
			words = append(words, w)
		}
		uid, gid, err := parseChown(in.Chown)
		if err != nil {
			return errs.New(errs.Invalid, "%v", err)
		}
		dst := words[len(words)-1]
		if !path.IsAbs(dst) {
			trailing := strings.HasSuffix(dst, "/") || dst == "." || strings.HasSuffix(dst, "/.")
			dst = path.Join(st.workdir, dst)
			if trailing {
				dst += "/"
			}
		}
		tf, err := tmpFile(b.Store.Dir)
		if err != nil {
			return err
		}
		defer tf.Close()
		if _, err := p.Context.copyTar(tf, in.Cmd, words[:len(words)-1], dst, uid, gid, in.Chmod); err != nil {
			return err
		}
		size, err := tf.Seek(0, io.SeekCurrent)
		if err != nil {
			return err
		}
		if err := ag.put(ctx, scratch+"/copy.tar", io.NewSectionReader(tf, 0, size)); err != nil {
			return err
		}
		return b.rootArgv(ctx, ag, []string{"tar", "-xpf", scratch + "/copy.tar", "-C", "/", "--numeric-owner", "--no-overwrite-dir"})
	}
	return nil
}

// runEnv is a RUN's environment: ARGs, then ENV over them.
func (s *state) runEnv() map[string]string {
	m := map[string]string{}
	for k, v := range s.args {
		m[k] = v
	}
	for k, v := range s.env {
		m[k] = v
	}
	return m
}

func (p Params) runTimeout() time.Duration {
	if p.RunTimeout > 0 {
		return p.RunTimeout
	}
	return time.Hour
}

// root runs a shell script as root in the build sandbox.
func (b *Builder) root(ctx context.Context, ag *agentClient, script, what string) error {
	return b.rootReq(ctx, ag, agentapi.ExecRequest{Argv: []string{"/bin/sh", "-c", script}}, what)
}

func (b *Builder) rootArgv(ctx context.Context, ag *agentClient, argv []string) error {
	return b.rootReq(ctx, ag, agentapi.ExecRequest{Argv: argv}, strings.Join(argv, " "))
}

func (b *Builder) rootReq(ctx context.Context, ag *agentClient, req agentapi.ExecRequest, what string) error {
	req.User, req.Cwd, req.TimeoutSeconds = "root", "/", 3600
	tail := &tailBuffer{max: 4096}
	res, err := ag.run(ctx, req, tail.write)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return errs.New(errs.Invalid, "%s failed in the build sandbox (exit code %d; /bin/sh, GNU find and tar are needed there): %s", what, res.ExitCode, tail.String())
	}
	return nil
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) write(s string) {
	t.b = append(t.b, s...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
}

func (t *tailBuffer) String() string { return strings.ToValidUTF8(string(t.b), "") }

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tmpFile is an unnamed file in dir (O_TMPFILE): it vanishes when closed,
// even if the server dies.
func tmpFile(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("temporary file in %s: %w", dir, err)
	}
	return os.NewFile(uintptr(fd), "tmp"), nil
}
