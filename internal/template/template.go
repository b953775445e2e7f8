// Package template builds and stores the root filesystems that sandboxes boot
// from.
//
// A template lives in <Store.Dir>/<name>/ as
//
//	rootfs/        the root filesystem
//	template.json  its Info
//
// A copy-on-write layer goes over rootfs when a sandbox starts, so a template
// is never modified once built. Builds happen in a temporary sibling directory
// (<Dir>/.build-<name>-<random>) that is renamed into place only when
// complete, so a crash or a cancelled build never leaves a half-built template
// behind: a directory with a template.json is always complete.
//
// Builds of one name are serialized across processes by an exclusive flock on
// <Dir>/.<name>.lock; the output of the last build of a name is kept in
// <Dir>/.build-<name>.log.
package template

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Info describes a built template. It is stored as template.json next to the
// template's rootfs.
type Info struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	// SizeBytes is the disk usage of the rootfs (allocated blocks, hard links
	// counted once).
	SizeBytes int64 `json:"sizeBytes"`
	// Packages are the packages the recipe asked for (their dependencies
	// are installed too).
	Packages []string `json:"packages"`
	// Suite is the Debian suite the rootfs was built from, e.g. "bookworm".
	Suite string `json:"suite"`
	// Recipe is the version of the recipe it was built from (a hash of its
	// packages and steps); empty for templates of older versions, which
	// Ensure rebuilds like any other out-of-date one.
	Recipe string `json:"recipe,omitempty"`
	// Origin is where a template not built from a recipe came from (an
	// image); nil for recipe builds. See Create.
	Origin *Origin `json:"origin,omitempty"`
	// Start, when set, makes the template warm: what its sandboxes run
	// before they are handed out (start.go). For a recipe's template it is
	// the recipe's.
	Start *Start `json:"start,omitempty"`
	// Owner is the id of the API key the template is private to: only
	// that key sees it, boots sandboxes from it, builds FROM it and deletes
	// it (see UsableBy). Empty: the server's, shared by every key.
	Owner string `json:"owner,omitempty"`
}

// UsableBy reports whether key keyID may see and use the template: a
// shared one (no Owner) or one of its own.
func (i Info) UsableBy(keyID string) bool { return i.Owner == "" || i.Owner == keyID }

// Progress reports that a build step begins (Done false) or has finished
// successfully (Done true). A step that fails reports no Done; the error is
// returned by Build instead. Elapsed is the time since the Build (or Ensure)
// call started. Steps may nest: the lines mmdebstrap logs are reported as
// steps named "mmdebstrap: ..." inside "downloading and installing packages
// (mmdebstrap)".
type Progress struct {
	Step    string
	Elapsed time.Duration
	Done    bool
}

var (
	// ErrNotFound is returned (wrapped, with the name and a hint to build it)
	// when a template does not exist or is incomplete.
	ErrNotFound = errors.New("template not found")
	// ErrUnknownRecipe is returned (wrapped, with the known recipes) by Build
	// and Ensure for a name that no recipe builds.
	ErrUnknownRecipe = errors.New("unknown template recipe")
)

const (
	rootfsDir = "rootfs"
	infoFile  = "template.json"
)

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ValidName reports whether name is a valid template name:
// [a-z0-9][a-z0-9._-]{0,62}.
func ValidName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("invalid template name %q: want 1-63 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// Store is a directory of templates. The zero value is not usable: set Dir.
type Store struct {
	// Dir holds one subdirectory per template.
	Dir string

	// recipes replaces the built-in recipes (tests inject fast fakes).
	recipes map[string]recipe
}

func notFound(name, detail string) error {
	if detail != "" {
		detail = " (" + detail + ")"
	}
	if _, ok := builtinRecipes[name]; ok {
		return fmt.Errorf("%w: %q%s; run `withruntime template build %s` on the server's host", ErrNotFound, name, detail, name)
	}
	known := make([]string, 0, len(builtinRecipes))
	for k := range builtinRecipes {
		known = append(known, k)
	}
	sort.Strings(known)
	return fmt.Errorf("%w: %q%s; the templates that can be built are: %s (`withruntime template ls` lists the built ones)",
		ErrNotFound, name, detail, strings.Join(known, ", "))
}

// Get returns the Info of a built template, or an error wrapping ErrNotFound
// if it is missing or incomplete.
func (s *Store) Get(name string) (Info, error) {
	if err := ValidName(name); err != nil {
		return Info{}, err
	}
	dir := filepath.Join(s.Dir, name)
	b, err := os.ReadFile(filepath.Join(dir, infoFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Info{}, notFound(name, "")
	}
	if err != nil {
		return Info{}, fmt.Errorf("template %q: %w", name, err)
	}
	var info Info
	if err := json.Unmarshal(b, &info); err != nil {
		return Info{}, notFound(name, fmt.Sprintf("unreadable %s: %v", infoFile, err))
	}
	st, err := os.Stat(filepath.Join(dir, rootfsDir))
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !st.IsDir()) {
		return Info{}, notFound(name, "incomplete: no rootfs directory")
	}
	if err != nil {
		return Info{}, fmt.Errorf("template %q: %w", name, err)
	}
	info.Name = name // the directory name is authoritative
	s.recipeStart(&info)
	return info, nil
}

// GetFor is Get as key keyID sees the store: another key's private
// template is not found, with the same error as a missing one (nothing
// says it exists).
func (s *Store) GetFor(name, keyID string) (Info, error) {
	info, err := s.Get(name)
	if err != nil {
		return Info{}, err
	}
	if !info.UsableBy(keyID) {
		return Info{}, notFound(name, "")
	}
	return info, nil
}

// CheckUse returns nil when key keyID may boot sandboxes from template
// name, and the error of a missing template otherwise (see GetFor).
func (s *Store) CheckUse(name, keyID string) error {
	_, err := s.GetFor(name, keyID)
	return err
}

// RootFS returns the absolute path of a built template's root filesystem,
// symlinks resolved.
func (s *Store) RootFS(name string) (string, error) {
	if _, err := s.Get(name); err != nil {
		return "", err
	}
	// Symlinks resolved (a template directory may link to another store's):
	// runsc wants the real path.
	p, err := filepath.EvalSymlinks(filepath.Join(s.Dir, name, rootfsDir))
	if err == nil {
		p, err = filepath.Abs(p)
	}
	if err != nil {
		return "", fmt.Errorf("template %q: %w", name, err)
	}
	return p, nil
}

// List returns the built templates sorted by name. Incomplete directories and
// in-progress builds are skipped; a missing Dir is an empty list.
func (s *Store) List() ([]Info, error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []Info{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	out := []Info{}
	for _, e := range entries {
		// A template directory may be a symlink to another store's.
		if (!e.IsDir() && e.Type()&fs.ModeSymlink == 0) || ValidName(e.Name()) != nil {
			continue
		}
		info, err := s.Get(e.Name())
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
