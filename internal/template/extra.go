package template

import (
	"fmt"
	"maps"
	"slices"
)

// WithPackages returns a Store over the same directory that also knows the
// recipe name: the base template's recipe (same suite, steps and user) with
// the Debian packages extra installed as well, built by mmdebstrap from the
// host's apt sources as base is. Build and Ensure of name then build it
// (Ensure rebuilds it when extra changes). It is for templates that a
// program defines for itself, such as bench/workloads' (base plus golang);
// users build theirs from a Dockerfile or an image (Create). An invalid
// name, one a built-in recipe has, or a package name that is not a Debian
// package name is an error.
func (s *Store) WithPackages(name string, extra ...string) (*Store, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if _, ok := builtinRecipes[name]; ok {
		return nil, fmt.Errorf("template name %q is a built-in recipe's; pick another name", name)
	}
	for _, p := range extra {
		if !validName.MatchString(p) {
			return nil, fmt.Errorf("package name %q: want a Debian package name (a-z, 0-9, '.', '_' or '-')", p)
		}
	}
	base := builtinRecipes["base"]
	r := base
	r.packages = append(slices.Clone(base.packages), extra...)
	recipes := maps.Clone(builtinRecipes)
	if s.recipes != nil {
		recipes = maps.Clone(s.recipes)
	}
	recipes[name] = r
	return &Store{Dir: s.Dir, recipes: recipes}, nil
}
