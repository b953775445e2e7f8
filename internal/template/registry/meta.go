// Package registry keeps templates as OCI images in a registry, for the
// Kubernetes driver, whose nodes pull a template instead of reading its
// directory: Push writes a built template's root filesystem as a one-layer
// image with the template's metadata in its config (labels), PushAgent the
// static agent the pods' init container copies, and a Catalog is how a
// server without the templates' root filesystems finds a template's image
// (pinned by digest) and its environment, read from the registry at first
// use and cached.
//
// The image config is the template's only metadata on that side: a
// registry is not trusted further than a template directory would be. The
// config is size-capped and validated (Meta.validate) before anything of it
// is used.
package registry

import (
	"encoding/json"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"withruntime.dev/runtime/internal/template"
)

// Labels of a template's image config.
const (
	// LabelTemplate is the template's name. A Catalog refuses an image
	// whose label does not name the template asked for (an image that is
	// not a template pushed by Push, or another template's).
	LabelTemplate = "dev.withruntime.template"
	// LabelInfo is the template's Info (template.json) as JSON: its
	// recipe, packages, size and, for a template made from an image, its
	// origin with the environment its sandboxes start with.
	LabelInfo = "dev.withruntime.template.info"
	// LabelAgent marks the agent's image ("1").
	LabelAgent = "dev.withruntime.agent"
)

// Caps on what a Catalog reads from a registry.
const (
	// MaxManifestBytes caps an image manifest (one layer: well under 4 KiB).
	MaxManifestBytes = 64 << 10
	// MaxConfigBytes caps an image config.
	MaxConfigBytes = 1 << 20
	// MaxInfoBytes caps the LabelInfo label.
	MaxInfoBytes = 256 << 10
	// MaxEnvBytes caps a template's environment, as for templates made
	// from images (internal/template/image).
	MaxEnvBytes = 256 << 10
)

// defaultPath is the PATH of the image config when the template sets none:
// what the container runtime starts the agent with.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Workdir and User of a template's image config: where commands start and
// whom they run as (the agent starts as root, as the pod asks, and runs
// commands as this user in this directory).
const (
	Workdir = "/workspace"
	User    = "user"
)

// Meta is what a template's image says about it.
type Meta struct {
	// Name is the template's name (LabelTemplate).
	Name string
	// Info is its template.json (LabelInfo), Name set to Name.
	Info template.Info
	// Env is the environment its sandboxes start with (Info.Origin.Env;
	// nil for a recipe's template).
	Env []string
}

// configFor is the image config of a template with info.
func configFor(info template.Info) (v1.Config, error) {
	raw, err := json.Marshal(info)
	if err != nil {
		return v1.Config{}, err
	}
	var env []string
	if info.Origin != nil {
		env = append(env, info.Origin.Env...)
	}
	if !hasVar(env, "PATH") {
		env = append(env, defaultPath)
	}
	return v1.Config{
		Env: env, WorkingDir: Workdir, User: User,
		Labels: map[string]string{LabelTemplate: info.Name, LabelInfo: string(raw)},
	}, nil
}

func hasVar(env []string, name string) bool {
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == name {
			return true
		}
	}
	return false
}

// metaFrom reads and checks the metadata of template name from an image
// config (raw, at most MaxConfigBytes): the platform is linux/amd64, the
// labels name this template and hold a readable Info within MaxInfoBytes,
// and its environment is KEY=value entries (no NUL, no empty key) within
// MaxEnvBytes. Anything else is an error saying what is wrong.
func metaFrom(name string, raw []byte) (Meta, error) {
	if len(raw) > MaxConfigBytes {
		return Meta{}, fmt.Errorf("its config is %d bytes, more than the %d a template's may be", len(raw), MaxConfigBytes)
	}
	cf, err := v1.ParseConfigFile(strings.NewReader(string(raw)))
	if err != nil {
		return Meta{}, fmt.Errorf("unreadable config: %w", err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		return Meta{}, fmt.Errorf("its platform is %s/%s; templates are linux/amd64", cf.OS, cf.Architecture)
	}
	got, ok := cf.Config.Labels[LabelTemplate]
	if !ok {
		return Meta{}, fmt.Errorf("it has no %s label: it is not a template image (push one with `withruntime template push %s --image REF`)", LabelTemplate, name)
	}
	if got != name {
		return Meta{}, fmt.Errorf("it is the image of template %.64q, not of %q", got, name)
	}
	rawInfo := cf.Config.Labels[LabelInfo]
	if len(rawInfo) > MaxInfoBytes {
		return Meta{}, fmt.Errorf("its %s label is %d bytes, more than %d", LabelInfo, len(rawInfo), MaxInfoBytes)
	}
	var info template.Info
	if err := json.Unmarshal([]byte(rawInfo), &info); err != nil {
		return Meta{}, fmt.Errorf("unreadable %s label: %w", LabelInfo, err)
	}
	info.Name = name
	// A start is not carried to a cluster yet: its templates are not warm
	// (sandbox/warm.go), so none is shown.
	info.Start = nil
	m := Meta{Name: name, Info: info}
	if info.Origin != nil {
		if err := checkEnv(info.Origin.Env); err != nil {
			return Meta{}, err
		}
		m.Env = info.Origin.Env
	}
	return m, nil
}

// checkEnv refuses an environment the manager should not pass on.
func checkEnv(env []string) error {
	n := 0
	for _, kv := range env {
		n += len(kv) + 1
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsRune(kv, 0) {
			return fmt.Errorf("its environment has the entry %.64q, not KEY=value", kv)
		}
	}
	if n > MaxEnvBytes {
		return fmt.Errorf("its environment is %d bytes, more than %d", n, MaxEnvBytes)
	}
	return nil
}
