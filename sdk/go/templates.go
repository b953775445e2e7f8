package withruntime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// DockerfileBuild says what Client.BuildTemplate builds.
type DockerfileBuild struct {
	// Context is the build context directory on this machine (default
	// "."). It is sent whole, less what its .dockerignore excludes (the
	// Docker syntax: *, ?, ** and [...] patterns, ! exceptions, # comments;
	// a pattern that matches a directory excludes what is in it): regular
	// files, directories and symlinks, with their modes and without owners.
	Context string
	// Dockerfile is the Dockerfile's path on this machine (default
	// Context/Dockerfile); it may lie outside Context. Ignored when
	// DockerfileContent is set.
	Dockerfile string
	// DockerfileContent is the Dockerfile itself, instead of a file.
	DockerfileContent string
	// BuildArgs are the ARGs' values.
	BuildArgs map[string]string
	// Internet lets RUN steps reach the internet.
	Internet bool
	// Allow lists the hosts (or CIDRs) RUN steps may reach, such as a
	// package index: RUN has no network by default.
	Allow []string
	// Start makes the template warm: its Command (the Dockerfile's CMD by
	// default) is started, its ReadyCommand must pass within
	// ReadyTimeoutSeconds (60 by default; the build fails with its last
	// output otherwise), and every create starts from a snapshot taken
	// then. Nil: the Dockerfile's CMD alone, if any.
	Start *TemplateStart
}

// contextDockerfile is where a Dockerfile from outside the context goes in
// the context tar; COPY and ADD leave it out (the server's
// dockerfile.ContextDockerfile).
const contextDockerfile = ".withruntime.Dockerfile"

// maxTemplateLabel is the longest upload label the server takes.
const maxTemplateLabel = 1024

// ListTemplates lists the server's templates by name. Errors:
// ErrUnauthorized.
func (c *Client) ListTemplates(ctx context.Context) ([]Template, error) {
	var out TemplateList
	if err := c.doJSON(ctx, "GET", "/v1/templates", nil, &out); err != nil {
		return nil, err
	}
	return out.Templates, nil
}

// GetTemplate returns the template name. Errors: ErrNotFound (no such
// template), ErrBadRequest (an invalid name).
func (c *Client) GetTemplate(ctx context.Context, name string) (Template, error) {
	var out Template
	err := c.doJSON(ctx, "GET", "/v1/templates/"+url.PathEscape(name), nil, &out)
	return out, err
}

// DeleteTemplate deletes the template name and its files (admin keys
// only). Errors: ErrNotFound, ErrConflict (sandboxes that are starting or
// running use it, or the warm pool serves it; the message names them),
// ErrForbidden.
func (c *Client) DeleteTemplate(ctx context.Context, name string) error {
	return c.doJSON(ctx, "DELETE", "/v1/templates/"+url.PathEscape(name), nil, nil)
}

// CreateTemplate makes the new template name from a linux/amd64 container
// image (admin keys only) and returns it once it is ready. image is, as
// for `withruntime template build --from-image`:
//
//   - a registry image, "[HOST[:PORT]/]REPO[:TAG|@sha256:DIGEST]", which the
//     server pulls with the registry credentials of the user it runs as;
//   - "oci-layout:DIR", or a directory path starting with "/", "./" or
//     "../": an OCI image layout on this machine, which this SDK reads and
//     uploads as a `docker save` tarball;
//   - "docker-archive:FILE", or a file path starting with "/", "./" or
//     "../" or ending in ".tar": a `docker save` tarball on this machine,
//     uploaded as it is (see UploadTemplate).
//
// progress, if not nil, is called with each "step" event as the server
// pulls, uploads and flattens the layers. The template's sandboxes run
// commands as "user" (uid 1000) in /workspace, with bash (or /bin/sh when
// the image has none), and start with the image's environment.
//
// Errors: ErrConflict (the name is taken), ErrBadRequest (an invalid name
// or reference, a wrong architecture, a malformed image or layer, a path
// escape, a device node), ErrNotFound (no such image, or the registry
// refused access; no such local file), ErrTooLarge (over the server's
// size cap), ErrForbidden. A failed build leaves nothing behind; so does
// cancelling ctx.
func (c *Client) CreateTemplate(ctx context.Context, name, image string, progress func(TemplateEvent)) (Template, error) {
	kind, path := localImage(image)
	if kind == "" {
		b, err := json.Marshal(CreateTemplateRequest{Name: name, FromImage: image})
		if err != nil {
			return Template{}, fmt.Errorf("withruntime: encoding request: %w", err)
		}
		return c.templateBuild(ctx, "/v1/templates", bytes.NewReader(b), "application/json", progress)
	}
	st, err := os.Stat(path)
	if err != nil {
		return Template{}, fmt.Errorf("%w: image %s: %w", ErrNotFound, image, err)
	}
	if err := c.checkTemplateFree(ctx, name); err != nil {
		return Template{}, err
	}
	if kind == "oci-layout" || kind == "path" && st.IsDir() {
		if !st.IsDir() {
			return Template{}, badRequest("image %s: %s is not a directory; an OCI layout is a directory with an oci-layout file", image, path)
		}
		files, err := readOCILayout(path, image)
		if err != nil {
			return Template{}, err
		}
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(files.writeArchive(pw)) }()
		defer pr.Close()
		return c.uploadTemplate(ctx, name, image, pr, progress)
	}
	if !st.Mode().IsRegular() {
		return Template{}, badRequest("image %s: %s is not a regular file; give a `docker save` tarball", image, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return Template{}, fmt.Errorf("withruntime: image %s: %w", image, err)
	}
	defer f.Close()
	return c.uploadTemplate(ctx, name, image, f, progress)
}

// UploadTemplate makes the new template name from a `docker save` tarball
// read from tarball (admin keys only); label is recorded as its origin
// (at most 1024 bytes; "" means "upload"). progress and the errors are
// those of CreateTemplate.
func (c *Client) UploadTemplate(ctx context.Context, name, label string, tarball io.Reader, progress func(TemplateEvent)) (Template, error) {
	if err := c.checkTemplateFree(ctx, name); err != nil {
		return Template{}, err
	}
	return c.uploadTemplate(ctx, name, label, tarball, progress)
}

func (c *Client) uploadTemplate(ctx context.Context, name, label string, body io.Reader, progress func(TemplateEvent)) (Template, error) {
	if len(label) > maxTemplateLabel {
		label = label[:maxTemplateLabel]
	}
	q := url.Values{"name": {name}}
	if label != "" {
		q.Set("image", label)
	}
	return c.templateBuild(ctx, "/v1/templates?"+q.Encode(), body, "application/x-tar", progress)
}

// BuildTemplate builds the new template name from a Dockerfile (admin keys
// only), as `withruntime template build NAME -f Dockerfile CONTEXT` does:
// the build context (b.Context, less its .dockerignore) is sent to the
// server, which runs the steps in a sandbox of its own, with the network
// b.Internet and b.Allow give (none by default), and keeps the result.
// The Dockerfile may use FROM (a template of the server, or a registry
// image), RUN, ENV, WORKDIR, USER, COPY and ADD (files of the context) and
// ARG; anything else is refused by name before anything runs.
//
// progress, if not nil, is called with each "step" event (each layer and
// instruction) and each "output" event (what RUN prints) as they happen.
//
// Errors: ErrConflict (the name is taken), ErrBadRequest (an unsupported
// instruction, a COPY of a file not in the context, a failing RUN, whose
// message has its exit code and last output), ErrNotFound (a FROM image
// that does not exist; no Dockerfile or context on this machine),
// ErrTooLarge, ErrForbidden. A failed build leaves nothing behind; so does
// cancelling ctx.
func (c *Client) BuildTemplate(ctx context.Context, name string, b DockerfileBuild, progress func(TemplateEvent)) (Template, error) {
	dir := b.Context
	if dir == "" {
		dir = "."
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return Template{}, fmt.Errorf("%w: build context %s: %w", ErrNotFound, dir, err)
	}
	df := []byte(b.DockerfileContent)
	dfName := contextDockerfile
	if b.DockerfileContent == "" {
		path := b.Dockerfile
		if path == "" {
			path = filepath.Join(dir, "Dockerfile")
		}
		var err error
		if df, err = os.ReadFile(path); err != nil {
			return Template{}, fmt.Errorf("%w: Dockerfile: %w", ErrNotFound, err)
		}
		if rel, err := relInside(dir, path); err == nil {
			dfName = rel
		}
	}
	ignore, err := readDockerignore(dir)
	if err != nil {
		return Template{}, err
	}
	q := url.Values{"name": {name}, "dockerfile": {dfName}}
	keys := make([]string, 0, len(b.BuildArgs))
	for k := range b.BuildArgs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		q.Add("buildArg", k+"="+b.BuildArgs[k])
	}
	if b.Internet {
		q.Set("internet", "true")
	}
	for _, h := range b.Allow {
		q.Add("allow", h)
	}
	if st := b.Start; st != nil {
		if st.Command != "" {
			q.Set("startCommand", st.Command)
		}
		if st.ReadyCommand != "" {
			q.Set("readyCommand", st.ReadyCommand)
		}
		if st.ReadyTimeoutSeconds != 0 {
			q.Set("readyTimeoutSeconds", strconv.FormatInt(st.ReadyTimeoutSeconds, 10))
		}
		if st.Kernel {
			q.Set("startKernel", "true")
		}
	}
	if err := c.checkTemplateFree(ctx, name); err != nil {
		return Template{}, err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeContext(pw, dir, ignore, dfName, df)) }()
	defer pr.Close()
	return c.templateBuild(ctx, "/v1/templates?"+q.Encode(), pr, "application/x-tar", progress)
}

// relInside returns path relative to dir, with forward slashes, if it lies
// inside dir.
func relInside(dir, path string) (string, error) {
	ad, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	ap, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(ad, ap)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", errors.New("outside")
	}
	return filepath.ToSlash(rel), nil
}

// checkTemplateFree refuses a taken name before a body is sent.
func (c *Client) checkTemplateFree(ctx context.Context, name string) error {
	_, err := c.GetTemplate(ctx, name)
	if err == nil {
		return &APIError{Status: http.StatusConflict, Code: "conflict",
			Message: fmt.Sprintf("template %q already exists; delete it first (DeleteTemplate) or pick another name", name)}
	}
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// templateBuild posts a template build, reads its NDJSON progress and
// returns the template, or the error event as an *APIError.
func (c *Client) templateBuild(ctx context.Context, path string, body io.Reader, contentType string, progress func(TemplateEvent)) (Template, error) {
	resp, err := c.request(waitFor(ctx, buildWait), "POST", path, body, contentType, contentTypeNDJSON)
	if err != nil {
		return Template{}, err
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), contentTypeNDJSON) {
		// A server that does not stream answers the template itself.
		var t Template
		if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
			return Template{}, fmt.Errorf("withruntime: decoding the template: %w", err)
		}
		return t, nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxEventBytes)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var ev TemplateEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return Template{}, fmt.Errorf("withruntime: bad event in the template build's progress: %w", err)
		}
		switch ev.Type {
		case "template":
			if ev.Template == nil {
				return Template{}, errors.New("withruntime: template event without a template")
			}
			return *ev.Template, nil
		case "error":
			e := ErrorInfo{Code: "internal", Message: "the template build failed without a message"}
			if ev.Error != nil {
				e = *ev.Error
			}
			return Template{}, &APIError{Status: statusOfCode(e.Code), Code: e.Code, Message: e.Message}
		case eventHeartbeat:
			continue // the server's sign of life during a quiet step
		}
		if progress != nil {
			progress(ev)
		}
	}
	if ctx.Err() != nil {
		return Template{}, fmt.Errorf("withruntime: template build: %w", ctx.Err())
	}
	if err := sc.Err(); err != nil {
		if isTimeout(err) {
			return Template{}, err
		}
		return Template{}, fmt.Errorf("withruntime: the template build's progress broke: %w", err)
	}
	return Template{}, errors.New("withruntime: the template build's progress ended without a result")
}

// badRequest is an error about bad input found on this side, matching
// ErrBadRequest.
func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
}

// localImage says whether image names a file or directory on this machine,
// by the same rules as the CLI and the server: kind is "oci-layout",
// "docker-archive", "path" or "" (a registry image).
func localImage(image string) (kind, path string) {
	image = strings.TrimSpace(image)
	if p, ok := strings.CutPrefix(image, "oci-layout:"); ok {
		return "oci-layout", p
	}
	if p, ok := strings.CutPrefix(image, "docker-archive:"); ok {
		return "docker-archive", p
	}
	for _, p := range []string{"/", "./", "../"} {
		if strings.HasPrefix(image, p) {
			return "path", image
		}
	}
	if strings.HasSuffix(image, ".tar") {
		return "path", image
	}
	return "", ""
}
