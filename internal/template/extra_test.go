package template

import (
	"errors"
	"slices"
	"testing"
)

func TestWithPackages(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	ext, err := s.WithPackages("bench-x", "golang")
	if err != nil {
		t.Fatal(err)
	}
	r, err := ext.recipe("bench-x")
	if err != nil {
		t.Fatal(err)
	}
	base := builtinRecipes["base"]
	if want := append(slices.Clone(base.packages), "golang"); !slices.Equal(r.packages, want) {
		t.Errorf("packages %v, want %v", r.packages, want)
	}
	if r.suite != base.suite || r.version() == base.version() {
		t.Errorf("suite %q version %s: want base's suite and another version", r.suite, r.version())
	}
	if _, err := ext.recipe("base"); err != nil {
		t.Errorf("base no longer known: %v", err)
	}
	if _, err := s.recipe("bench-x"); !errors.Is(err, ErrUnknownRecipe) {
		t.Errorf("the original store knows the new recipe: %v", err)
	}
	for _, bad := range [][]string{{"base", "golang"}, {"Bad Name"}, {"ok", "golang; rm -rf /"}, {"ok", "--option"}} {
		if _, err := s.WithPackages(bad[0], bad[1:]...); err == nil {
			t.Errorf("WithPackages(%q) accepted", bad)
		}
	}
}
