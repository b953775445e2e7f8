package api

import (
	"archive/tar"
	"bytes"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"withruntime.dev/runtime/internal/egress"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/template"
	"withruntime.dev/runtime/internal/template/dockerfile"
	"withruntime.dev/runtime/internal/template/rootfs"
)

// buildDockerfile builds a template from a Dockerfile: the body is the build
// context as a tar (Content-Type application/x-tar) and the query says
//
//	name=NAME           the new template
//	dockerfile=PATH     the Dockerfile's path in the context
//	buildArg=KEY=VALUE  an ARG's value (repeatable)
//	internet=true       RUN steps may reach the internet
//	allow=HOST          a host (or CIDR) RUN steps may reach (repeatable)
//	private=true        the template is the key's only (a tenant key's always are)
//	startCommand, readyCommand, readyTimeoutSeconds, startKernel
//	                    the template's start (templates_start.go; CMD
//	                    gives the start command too)
//
// The Dockerfile is parsed before anything runs (an unsupported instruction
// is a 400 naming it); the RUN steps run in a sandbox of this server owned
// by the request's key.
func (s *Server) buildDockerfile(w http.ResponseWriter, r *http.Request, st *template.Store) error {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "name", "dockerfile", "buildArg", "internet", "allow", "private":
		default:
			if !slices.Contains(startQuery, k) {
				return badRequest("unknown query parameter %q; a Dockerfile build takes name, dockerfile, buildArg, internet, allow, private, startCommand, readyCommand, readyTimeoutSeconds and startKernel", k)
			}
		}
	}
	start, err := startFromQuery(q)
	if err != nil {
		return err
	}
	name := q.Get("name")
	if err := st.CheckNew(name); err != nil {
		return err
	}
	private, err := privateQuery(r)
	if err != nil {
		return err
	}
	owner, err := s.templateOwner(r, st, private)
	if err != nil {
		return err
	}
	dfPath, err := rootfs.Clean(q.Get("dockerfile"))
	if err != nil || dfPath == "" {
		return badRequest("dockerfile=%q: give the Dockerfile's path inside the build context", q.Get("dockerfile"))
	}
	args := map[string]string{}
	for _, kv := range q["buildArg"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return badRequest("buildArg=%q: write KEY=VALUE", kv)
		}
		args[k] = v
	}
	var policy *egress.Policy
	if q.Has("internet") || q.Has("allow") {
		internet, err := strconv.ParseBool(q.Get("internet"))
		if q.Has("internet") && err != nil {
			return badRequest("internet=%q: write true or false", q.Get("internet"))
		}
		policy = &egress.Policy{Internet: internet, Allow: q["allow"]}
	}
	spool, err := s.spool(r, st.Dir)
	if err != nil {
		return err
	}
	defer spool.Close()
	size, err := spool.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	bctx := dockerfile.Context{R: spool, Size: size}
	df, err := readContextFile(bctx, dfPath)
	if err != nil {
		return err
	}
	f, err := dockerfile.Parse(bytes.NewReader(df))
	if err != nil {
		return err
	}
	b := &dockerfile.Builder{Sandboxes: s.cfg.Manager, Store: st, Images: s.cfg.Images}
	return s.runBuild(w, r, name, s.warmBuild(r.Context(), st, name, func(progress func(template.Progress), output func(string)) (template.Info, error) {
		return b.Build(r.Context(), dockerfile.Params{Name: name, Dockerfile: f, Context: bctx, BuildArgs: args,
			KeyID: keyFrom(r.Context()).ID, Owner: owner, Network: policy, Start: start}, progress, output)
	}))
}

// readContextFile returns the regular file name of a build context.
func readContextFile(c dockerfile.Context, name string) ([]byte, error) {
	tr := tar.NewReader(io.NewSectionReader(c.R, 0, c.Size))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil, errs.New(errs.Invalid, "the build context has no %s; send it in the context (the CLI adds the -f file)", name)
		}
		if err != nil {
			return nil, errs.New(errs.Invalid, "the build context is not a valid tar: %v", err)
		}
		if n, err := rootfs.Clean(hdr.Name); err != nil || n != name {
			continue
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil, errs.New(errs.Invalid, "%s in the build context is not a regular file", name)
		}
		if hdr.Size > dockerfile.MaxDockerfileBytes {
			return nil, errs.New(errs.Invalid, "%s is over %d bytes", name, dockerfile.MaxDockerfileBytes)
		}
		return io.ReadAll(tr)
	}
}
