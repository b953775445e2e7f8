package e2b

import (
	"slices"
	"strings"
	"testing"
)

// A build's name gives the alias and its tags: the name's tag, else E2B's
// default tag, then the request's; what is not a tag is refused.
func TestParseName(t *testing.T) {
	for _, c := range []struct {
		name  string
		tags  []string
		alias string
		want  []string
	}{
		{"my-app", nil, "my-app", []string{"default"}},
		{"my_app:default", nil, "my_app", []string{"default"}},
		{"app:v1.0.0", nil, "app", []string{"v1.0.0"}},
		{"app", []string{"v1", "latest", "app:v1"}, "app", []string{"default", "v1", "latest"}},
		{"app:prod", []string{"Stable"}, "app", []string{"prod", "Stable"}},
	} {
		alias, tags, err := parseName(c.name, c.tags)
		if err != nil || alias != c.alias || !slices.Equal(tags, c.want) {
			t.Errorf("%q %v: %q %v %v; want %q %v", c.name, c.tags, alias, tags, err, c.alias, c.want)
		}
	}
	for _, c := range []struct {
		name string
		tags []string
		want string
	}{
		{"app:", nil, `tag ""`},
		{":v1", nil, "give 1-50 characters"},
		{"app:a:b", nil, `give the tag alone`},
		{"app", []string{"other:v1"}, `give the tag alone, or "app:v1"`},
		{"app", []string{"-x"}, "starting with a letter or digit"},
		{"app", []string{"a/b"}, `tag "a/b"`},
		{"app", []string{strings.Repeat("v", 129)}, "1-128 characters"},
		{"team/app", nil, "namespaced names"},
		{"App", nil, "give 1-50 characters"},
		{"", nil, "give 1-50"},
	} {
		if _, _, err := parseName(c.name, c.tags); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q %v: %v; want %q", c.name, c.tags, err, c.want)
		}
	}
	many := make([]string, maxTagsPerTemplate)
	for i := range many {
		many[i] = "t" + strings.Repeat("x", i)
	}
	if _, _, err := parseName("app", many); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("%d tags: %v", len(many)+1, err)
	}
}

// A reference without a tag means the default tag.
func TestSplitRef(t *testing.T) {
	for ref, want := range map[string][3]string{
		"app": {"app", "default", "false"}, "app:v1": {"app", "v1", "true"}, "app:": {"app", "", "true"}, ":x": {"", "x", "true"},
	} {
		name, tag, has := splitRef(ref)
		if name != want[0] || tag != want[1] || (has != (want[2] == "true")) {
			t.Errorf("%q: %q %q %v; want %v", ref, name, tag, has, want)
		}
	}
}
