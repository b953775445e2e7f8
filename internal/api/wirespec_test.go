package api

// The wire types against api/openapi.yaml. Package wire
// (sdk/go/wire) is the one Go copy of the document's schemas, used by this
// server and by the Go SDK alike; this test reads its source and holds
// every exported struct to the schema of the same name, field by field:
//   - every schema has a struct, and every exported struct a schema;
//   - the same properties: a field's JSON name is a property, and every
//     property is a field (explicit json tags, no embedding);
//   - optionality: in a schema only answers carry, a property is required
//     exactly when the field has no omitempty (what the server always
//     sends); in one a request carries (NetworkPolicy: both), a required
//     property must not be omitempty (a request may leave out what is not
//     required, so an answer's always-sent field cannot be required there);
//   - JSON types: string, integer, number, boolean, date-time, arrays,
//     maps and $refs to the schema named after the Go type;
//   - enums: each value is named, quoted, in the field's doc comment.
// The document's own rules follow: every object schema closes with
// additionalProperties: false and every property has a description.

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

const (
	specFile = "../../api/openapi.yaml"
	wireDir  = "../../sdk/go/wire"
)

var loadDoc = sync.OnceValues(func() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(specFile)
	if err != nil {
		return nil, err
	}
	return doc, doc.Validate(loader.Context)
})

func specDoc(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := loadDoc()
	if err != nil {
		t.Fatalf("api/openapi.yaml: %v", err)
	}
	return doc
}

// wireStructs parses package wire's source and returns its exported
// struct types by name.
func wireStructs(t *testing.T) map[string]*ast.TypeSpec {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(wireDir, "*.go"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Go files in %s: %v", wireDir, err)
	}
	var files []*ast.File
	fset := token.NewFileSet()
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return structsOf(files)
}

func parseWire(t *testing.T, src string) map[string]*ast.TypeSpec {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "synthetic.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	return structsOf([]*ast.File{f})
}

// structsOf returns the exported struct types declared in files, by name.
// A type spec without its own doc comment takes its declaration's.
func structsOf(files []*ast.File) map[string]*ast.TypeSpec {
	out := map[string]*ast.TypeSpec{}
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				ts := s.(*ast.TypeSpec)
				if _, ok := ts.Type.(*ast.StructType); !ok || !ts.Name.IsExported() {
					continue
				}
				if ts.Doc == nil && len(g.Specs) == 1 {
					ts.Doc = g.Doc
				}
				out[ts.Name.Name] = ts
			}
		}
	}
	return out
}

// schemaUse says, for each component schema, whether an answer carries it
// (reached from any response) and whether a request does.
type schemaUse struct{ response, request bool }

func schemaUses(doc *openapi3.T) map[string]schemaUse {
	uses := map[string]schemaUse{}
	var walk func(s *openapi3.SchemaRef, response bool, seen map[*openapi3.Schema]bool)
	walk = func(s *openapi3.SchemaRef, response bool, seen map[*openapi3.Schema]bool) {
		if s == nil || s.Value == nil || seen[s.Value] {
			return
		}
		seen[s.Value] = true
		if name, ok := strings.CutPrefix(s.Ref, "#/components/schemas/"); ok {
			u := uses[name]
			if response {
				u.response = true
			} else {
				u.request = true
			}
			uses[name] = u
		}
		v := s.Value
		for _, p := range v.Properties {
			walk(p, response, seen)
		}
		walk(v.Items, response, seen)
		walk(v.AdditionalProperties.Schema, response, seen)
		for _, l := range []openapi3.SchemaRefs{v.AllOf, v.OneOf, v.AnyOf} {
			for _, x := range l {
				walk(x, response, seen)
			}
		}
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				for _, mt := range op.RequestBody.Value.Content {
					walk(mt.Schema, false, map[*openapi3.Schema]bool{})
				}
			}
			for _, r := range op.Responses.Map() {
				if r.Value == nil {
					continue
				}
				for _, mt := range r.Value.Content {
					walk(mt.Schema, true, map[*openapi3.Schema]bool{})
				}
			}
		}
	}
	return uses
}

// checkWire holds each struct of structs to the document's schema of the
// same name and returns what differs, one sentence each, sorted.
func checkWire(doc *openapi3.T, structs map[string]*ast.TypeSpec) []string {
	uses := schemaUses(doc)
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for name, ts := range structs {
		ref := doc.Components.Schemas[name]
		if ref == nil {
			fail("wire.%s has no schema in api/openapi.yaml: add components/schemas/%s (or unexport the type if it is not a wire shape)", name, name)
			continue
		}
		if ts.Doc == nil {
			fail("wire.%s has no doc comment", name)
		}
		s := ref.Value
		use := uses[name]
		required := map[string]bool{}
		for _, r := range s.Required {
			required[r] = true
		}
		fields := map[string]bool{}
		var doc *ast.CommentGroup // a field without a comment shares the one above it
		for _, f := range ts.Type.(*ast.StructType).Fields.List {
			if f.Doc != nil {
				doc = f.Doc
			}
			if len(f.Names) == 0 {
				fail("wire.%s embeds %s: write its fields out, as the schema does", name, exprString(f.Type))
				continue
			}
			tag := ""
			if f.Tag != nil {
				tv, _ := strconv.Unquote(f.Tag.Value)
				tag = reflect.StructTag(tv).Get("json")
			}
			for _, id := range f.Names {
				if !id.IsExported() || tag == "-" {
					continue
				}
				field := name + "." + id.Name
				jname, opts, _ := strings.Cut(tag, ",")
				if jname == "" {
					fail("wire.%s has no json tag naming its property", field)
					continue
				}
				fields[jname] = true
				omit := slices.Contains(strings.Split(opts, ","), "omitempty")
				p := s.Properties[jname]
				if p == nil {
					fail("wire.%s: %q is not a property of schema %s; add it to api/openapi.yaml (with a description) or remove the field", field, jname, name)
					continue
				}
				answerOnly := use.response && !use.request
				switch {
				case answerOnly && required[jname] && omit:
					fail("wire.%s: %q is required in schema %s, yet the field is omitempty", field, jname, name)
				case answerOnly && !required[jname] && !omit:
					fail("wire.%s: %q is always sent (no omitempty), yet schema %s does not require it", field, jname, name)
				case !answerOnly && required[jname] && omit:
					fail("wire.%s: request property %q is required in schema %s, yet the field is omitempty", field, jname, name)
				}
				if msg := typeMismatch(f.Type, p); msg != "" {
					fail("wire.%s (%s): %s", field, exprString(f.Type), msg)
				}
				for _, v := range enumOf(p) {
					if doc == nil || !strings.Contains(doc.Text(), strconv.Quote(v)) {
						fail("wire.%s: the doc comment does not name %q, a value of %s.%s's enum", field, v, name, jname)
					}
				}
			}
		}
		for p := range s.Properties {
			if !fields[p] {
				fail("wire.%s has no field for property %q of schema %s", name, p, name)
			}
		}
	}
	sort.Strings(problems)
	return problems
}

// enumOf is a property's enum values (its items' for an array).
func enumOf(p *openapi3.SchemaRef) []string {
	v := p.Value
	if v.Type.Is("array") && v.Items != nil {
		v = v.Items.Value
	}
	var out []string
	for _, e := range v.Enum {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// refName is the component a property refers to (directly, or as the
// single allOf that lets it carry a description), "" if none.
func refName(p *openapi3.SchemaRef) string {
	ref := p.Ref
	if ref == "" && p.Value != nil && len(p.Value.AllOf) == 1 {
		ref = p.Value.AllOf[0].Ref
	}
	name, _ := strings.CutPrefix(ref, "#/components/schemas/")
	return name
}

// typeMismatch says how the Go type e differs from the property p's JSON
// type, "" when they agree.
func typeMismatch(e ast.Expr, p *openapi3.SchemaRef) string {
	if st, ok := e.(*ast.StarExpr); ok {
		e = st.X
	}
	if ref := refName(p); ref != "" {
		if id, ok := e.(*ast.Ident); ok && id.Name == ref {
			return ""
		}
		return fmt.Sprintf("the schema has $ref %s; the field must be of type %s", ref, ref)
	}
	v := p.Value
	want := func(typ string) string {
		if v.Type.Is(typ) {
			return ""
		}
		return fmt.Sprintf("the schema's type is %v, not %s", v.Type.Slice(), typ)
	}
	switch e := e.(type) {
	case *ast.Ident:
		switch e.Name {
		case "string":
			return want("string")
		case "bool":
			return want("boolean")
		case "int", "int32", "int64", "uint", "uint32", "uint64":
			return want("integer")
		case "float32", "float64":
			return want("number")
		}
		return fmt.Sprintf("the schema declares %v inline; a field of wire type %s needs a $ref to it", v.Type.Slice(), e.Name)
	case *ast.SelectorExpr:
		switch exprString(e) {
		case "time.Time":
			if msg := want("string"); msg != "" || v.Format != "date-time" {
				return "a time.Time is a string of format date-time"
			}
			return ""
		case "json.RawMessage":
			if v.Type != nil && len(v.Type.Slice()) > 0 {
				return fmt.Sprintf("a json.RawMessage is any JSON, yet the schema's type is %v", v.Type.Slice())
			}
			return ""
		}
	case *ast.ArrayType:
		if e.Len == nil {
			if msg := want("array"); msg != "" {
				return msg
			}
			if v.Items == nil {
				return "the schema's array has no items"
			}
			if msg := typeMismatch(e.Elt, v.Items); msg != "" {
				return "items: " + msg
			}
			return ""
		}
	case *ast.MapType:
		if id, ok := e.Key.(*ast.Ident); ok && id.Name == "string" {
			if msg := want("object"); msg != "" {
				return msg
			}
			ap := v.AdditionalProperties.Schema
			if ap == nil {
				if exprString(e.Value) == "json.RawMessage" && v.AdditionalProperties.Has != nil && *v.AdditionalProperties.Has {
					return ""
				}
				return "a map needs additionalProperties with the values' schema"
			}
			if msg := typeMismatch(e.Value, ap); msg != "" {
				return "additionalProperties: " + msg
			}
			return ""
		}
	}
	return "no JSON schema type corresponds to this Go type"
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	case *ast.ArrayType:
		return "[]" + exprString(e.Elt)
	case *ast.MapType:
		return "map[" + exprString(e.Key) + "]" + exprString(e.Value)
	}
	return fmt.Sprintf("%T", e)
}

// TestWireMatchesSpec holds package wire to api/openapi.yaml (see the top
// of this file), and the document to its own rules.
func TestWireMatchesSpec(t *testing.T) {
	doc := specDoc(t)
	structs := wireStructs(t)
	for _, p := range checkWire(doc, structs) {
		t.Error(p)
	}
	for name, ref := range doc.Components.Schemas {
		if structs[name] == nil {
			t.Errorf("schema %s has no struct in package wire (sdk/go/wire): add type %s there", name, name)
		}
		s := ref.Value
		if s.Type.Is("object") && len(s.Properties) > 0 && (s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has) {
			t.Errorf("schema %s does not set additionalProperties: false", name)
		}
		for pname, p := range s.Properties {
			if p.Ref == "" && p.Value.Description == "" {
				t.Errorf("schema %s: property %s has no description", name, pname)
			}
		}
	}
}

// TestWireCheckerCatchesDrift runs the checker on synthetic wire types:
// each breaks the document in one way, and the checker must say so. The
// first is the case of issue 29: a field added to a wire type but not to
// api/openapi.yaml.
func TestWireCheckerCatchesDrift(t *testing.T) {
	doc := specDoc(t)
	for _, c := range []struct {
		name, src, want string
	}{
		{"field missing from the document", `
// KillRequest is the body of POST .../kill.
type KillRequest struct {
	// Signal is "SIGTERM" or "SIGKILL".
	Signal string ` + "`json:\"signal,omitempty\"`" + `
	// Force is new.
	Force bool ` + "`json:\"force,omitempty\"`" + `
}`, `wire.KillRequest.Force: "force" is not a property of schema KillRequest`},
		{"struct without a schema", `
// Gadget is new.
type Gadget struct {
	X int ` + "`json:\"x\"`" + `
}`, `wire.Gadget has no schema in api/openapi.yaml`},
		{"property without a field", `
// MkdirRequest makes a directory.
type MkdirRequest struct {
	Path string ` + "`json:\"path\"`" + `
}`, `wire.MkdirRequest has no field for property "parents"`},
		{"required answer field made omitempty", `
// ProcessList lists processes.
type ProcessList struct {
	Processes []Process ` + "`json:\"processes,omitempty\"`" + `
}`, `wire.ProcessList.Processes: "processes" is required in schema ProcessList, yet the field is omitempty`},
		{"optional answer field always sent", `
// Process is a background command.
type Process struct {
	Pid    int         ` + "`json:\"pid\"`" + `
	Result *ExecResult ` + "`json:\"result\"`" + `
}`, `wire.Process.Result: "result" is always sent (no omitempty), yet schema Process does not require it`},
		{"required request field made omitempty", `
// RenameRequest moves a file.
type RenameRequest struct {
	From string ` + "`json:\"from,omitempty\"`" + `
	To   string ` + "`json:\"to\"`" + `
}`, `request property "from" is required in schema RenameRequest, yet the field is omitempty`},
		{"wrong JSON type", `
// KillRequest is the body of POST .../kill.
type KillRequest struct {
	// Signal is a number now.
	Signal int ` + "`json:\"signal,omitempty\"`" + `
}`, `the schema's type is [string], not integer`},
		{"enum value the doc does not name", `
// SandboxEvent is the first line.
type SandboxEvent struct {
	// Type is the event's type.
	Type    string  ` + "`json:\"type\"`" + `
	Sandbox Sandbox ` + "`json:\"sandbox\"`" + `
}`, `does not name "sandbox", a value of SandboxEvent.type's enum`},
		{"a $ref the field does not follow", `
// SandboxList lists sandboxes.
type SandboxList struct {
	Sandboxes []map[string]string ` + "`json:\"sandboxes\"`" + `
}`, `items: the schema has $ref Sandbox`},
	} {
		got := checkWire(doc, parseWire(t, "package wire\n"+c.src))
		if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, c.want) }) {
			t.Errorf("%s: the checker did not say %q; it said %q", c.name, c.want, got)
		}
	}
}
