package tools

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// A providerRule is one written rule of a provider about tool declarations,
// encoded as a check. It returns what is wrong, or nothing.
type providerRule struct {
	rule  string
	check func(d Definition, schema map[string]any) []string
}

// The rules each provider writes for tool (function) declarations, as far
// as they concern these schemas. Sources: OpenAI's function-calling and
// Structured Outputs guides (strict mode), Anthropic's tool-use docs
// (including strict tool use), Gemini's FunctionDeclaration reference
// (parametersJsonSchema) and the MCP specification (tools).
var providerRules = map[string][]providerRule{
	"openai-strict": {
		{"name matches ^[a-zA-Z0-9_-]{1,64}$", nameMatches(`^[a-zA-Z0-9_-]{1,64}$`)},
		{"the root is an object schema, not anyOf", rootObject},
		{"every object has additionalProperties: false", everyObject(func(o map[string]any) string {
			if o["additionalProperties"] != false {
				return "additionalProperties must be false"
			}
			return ""
		})},
		{"every property is listed in required", everyPropertyRequired},
		{"only supported keywords", onlyKeywords("type", "properties", "required", "additionalProperties", "description",
			"enum", "anyOf", "items", "$defs", "$ref", "pattern", "format", "minimum", "maximum",
			"exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems")},
		{"type is one of string, number, integer, boolean, object, array, null", typesIn("string", "number", "integer", "boolean", "object", "array", "null")},
		{"at most 5000 properties and 10 levels of nesting", sizeLimits(5000, 10)},
		{"description present (a model needs it)", hasDescription},
	},
	"anthropic": {
		{"name matches ^[a-zA-Z0-9_-]{1,64}$", nameMatches(`^[a-zA-Z0-9_-]{1,64}$`)},
		{"input_schema is an object schema", rootObject},
		{"strict tool use: additionalProperties false on every object", everyObject(func(o map[string]any) string {
			if o["additionalProperties"] != false {
				return "additionalProperties must be false"
			}
			return ""
		})},
		{"strict tool use: no numeric or string-length constraints", forbidKeywords("minimum", "maximum", "exclusiveMinimum",
			"exclusiveMaximum", "multipleOf", "minLength", "maxLength")},
		{"no recursive schemas", forbidKeywords("$ref", "$dynamicRef")},
		{"description present", hasDescription},
	},
	"gemini": {
		{"name starts with a letter or _, then a-z, A-Z, 0-9, _, ., :, -, at most 64", nameMatches(`^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$`)},
		{"parameter names start with a letter or _, then a-z, A-Z, 0-9, _, at most 64", paramNamesMatch(`^[a-zA-Z_][a-zA-Z0-9_]{0,63}$`)},
		{"parametersJsonSchema describes an object whose properties are the parameters", rootObject},
		{"only keywords of the supported JSON Schema subset", onlyKeywords("$id", "$defs", "$ref", "$anchor", "type", "format",
			"title", "description", "enum", "items", "prefixItems", "minItems", "maxItems", "minimum", "maximum", "anyOf",
			"oneOf", "properties", "additionalProperties", "required", "propertyOrdering")},
		{"type is a single string", typesIn("string", "number", "integer", "boolean", "object", "array", "null")},
	},
	"mcp": {
		{"name is 1-128 of A-Z, a-z, 0-9, _, -, .", nameMatches(`^[A-Za-z0-9_.-]{1,128}$`)},
		{"inputSchema is a JSON Schema object with type \"object\"", rootObject},
		{"description present", hasDescription},
	},
	// The issue's own rules, which make one schema fit every provider.
	"portable": {
		{"flat: no property is itself an object or array", flat},
		{"no $ref, oneOf, const, format, type arrays", forbidKeywords("$ref", "oneOf", "const", "format", "allOf", "not", "default")},
		{"every property required", everyPropertyRequired},
	},
}

func TestSchemasMeetProviderRules(t *testing.T) {
	for _, d := range Definitions() {
		var schema map[string]any
		if err := json.Unmarshal(d.InputSchema, &schema); err != nil {
			t.Fatalf("%s: schema is not a JSON object: %v", d.Name, err)
		}
		for provider, rules := range providerRules {
			for _, r := range rules {
				for _, problem := range r.check(d, schema) {
					t.Errorf("%s for %s: rule %q: %s", d.Name, provider, r.rule, problem)
				}
			}
		}
	}
}

// TestRulesCatchBadSchemas checks that the rules themselves reject what
// they should, so a passing TestSchemasMeetProviderRules means something.
func TestRulesCatchBadSchemas(t *testing.T) {
	bad := []struct {
		provider, schema string
	}{
		{"openai-strict", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`},
		{"openai-strict", `{"type":"object","properties":{"a":{"type":"string"}},"required":[],"additionalProperties":false}`},
		{"gemini", `{"type":"object","properties":{"a":{"type":["string","null"]}},"required":["a"],"additionalProperties":false}`},
		{"portable", `{"type":"object","properties":{"a":{"type":"string","format":"uri"}},"required":["a"],"additionalProperties":false}`},
		{"portable", `{"type":"object","properties":{"a":{"oneOf":[{"type":"string"}]}},"required":["a"],"additionalProperties":false}`},
		{"mcp", `{"type":"string"}`},
		{"anthropic", `{"type":"object","properties":{"a":{"type":"integer","minimum":0}},"required":["a"],"additionalProperties":false}`},
	}
	for _, b := range bad {
		var schema map[string]any
		if err := json.Unmarshal([]byte(b.schema), &schema); err != nil {
			t.Fatal(err)
		}
		d := Definition{Name: "x", Description: "x", InputSchema: json.RawMessage(b.schema)}
		found := false
		for _, r := range providerRules[b.provider] {
			if len(r.check(d, schema)) > 0 {
				found = true
			}
		}
		if !found {
			t.Errorf("%s rules accept %s", b.provider, b.schema)
		}
	}
}

func TestGoldenDefinitions(t *testing.T) {
	ts := Bind(nil)
	golden := map[string]any{}
	for _, d := range Definitions() {
		golden[d.Name] = d
	}
	golden["openai_chat"] = OpenAIChat(ts)
	golden["openai_responses"] = OpenAIResponses(ts)
	golden["anthropic"] = Anthropic(ts)
	golden["gemini"] = Gemini(ts)
	for name, v := range golden {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		got := buf.Bytes()
		path := filepath.Join("testdata", name+".golden")
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the golden file; if the change is meant, run go test -update and review the diff:\n%s", path, got)
		}
	}
}

func TestDefinitionsMatchTools(t *testing.T) {
	defs, ts := Definitions(), Bind(nil)
	names := []string{ExecName, ReadFileName, WriteFileName, ListFilesName}
	if len(defs) != 4 || len(ts) != 4 {
		t.Fatalf("want 4 tools, got %d definitions and %d tools", len(defs), len(ts))
	}
	for i := range defs {
		if defs[i].Name != names[i] || ts[i].Name != names[i] || !bytes.Equal(defs[i].InputSchema, ts[i].InputSchema) {
			t.Errorf("tool %d: definition %s, tool %s", i, defs[i].Name, ts[i].Name)
		}
		// The fields the arguments decoder knows are the schema's properties.
		var schema struct {
			Properties map[string]struct {
				Type string `json:"type"`
			} `json:"properties"`
		}
		json.Unmarshal(defs[i].InputSchema, &schema)
		for _, f := range specs[i].fields {
			p, ok := schema.Properties[f.name]
			want := "string"
			if f.integer {
				want = "integer"
			}
			if !ok || p.Type != want {
				t.Errorf("%s: field %s (%s) not in the schema as %s", defs[i].Name, f.name, want, want)
			}
		}
		if len(schema.Properties) != len(specs[i].fields) {
			t.Errorf("%s: schema has %d properties, decoder %d fields", defs[i].Name, len(schema.Properties), len(specs[i].fields))
		}
		for _, s := range []string{"/workspace"} {
			if !strings.Contains(defs[i].Description, s) {
				t.Errorf("%s: description does not say where paths resolve", defs[i].Name)
			}
		}
	}
}

// --- rule helpers ---

func nameMatches(re string) func(Definition, map[string]any) []string {
	rx := regexp.MustCompile(re)
	return func(d Definition, _ map[string]any) []string {
		if !rx.MatchString(d.Name) {
			return []string{fmt.Sprintf("name %q does not match %s", d.Name, re)}
		}
		return nil
	}
}

func paramNamesMatch(re string) func(Definition, map[string]any) []string {
	rx := regexp.MustCompile(re)
	return func(_ Definition, s map[string]any) []string {
		var out []string
		props, _ := s["properties"].(map[string]any)
		for name := range props {
			if !rx.MatchString(name) {
				out = append(out, fmt.Sprintf("parameter %q does not match %s", name, re))
			}
		}
		return out
	}
}

func rootObject(_ Definition, s map[string]any) []string {
	if s["type"] != "object" {
		return []string{fmt.Sprintf("root type is %v, not \"object\"", s["type"])}
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf", "enum", "not"} {
		if _, ok := s[k]; ok {
			return []string{"root has " + k}
		}
	}
	if _, ok := s["properties"].(map[string]any); !ok {
		return []string{"root has no properties object"}
	}
	return nil
}

func hasDescription(d Definition, s map[string]any) []string {
	var out []string
	if len(strings.TrimSpace(d.Description)) < 20 {
		out = append(out, "tool description missing or too short")
	}
	props, _ := s["properties"].(map[string]any)
	for name, p := range props {
		if desc, _ := p.(map[string]any)["description"].(string); desc == "" {
			out = append(out, "property "+name+" has no description")
		}
	}
	return out
}

// walk calls f on every schema node (the root and each property, item,
// anyOf branch and definition).
func walk(s map[string]any, f func(map[string]any)) {
	f(s)
	if props, ok := s["properties"].(map[string]any); ok {
		for _, p := range props {
			if m, ok := p.(map[string]any); ok {
				walk(m, f)
			}
		}
	}
	if it, ok := s["items"].(map[string]any); ok {
		walk(it, f)
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if list, ok := s[k].([]any); ok {
			for _, e := range list {
				if m, ok := e.(map[string]any); ok {
					walk(m, f)
				}
			}
		}
	}
	if defs, ok := s["$defs"].(map[string]any); ok {
		for _, e := range defs {
			if m, ok := e.(map[string]any); ok {
				walk(m, f)
			}
		}
	}
}

func everyObject(check func(map[string]any) string) func(Definition, map[string]any) []string {
	return func(_ Definition, s map[string]any) []string {
		var out []string
		walk(s, func(n map[string]any) {
			if n["type"] == "object" {
				if p := check(n); p != "" {
					out = append(out, p)
				}
			}
		})
		return out
	}
}

func everyPropertyRequired(_ Definition, s map[string]any) []string {
	var out []string
	walk(s, func(n map[string]any) {
		props, _ := n["properties"].(map[string]any)
		req, _ := n["required"].([]any)
		for name := range props {
			if !slices.Contains(req, any(name)) {
				out = append(out, "property "+name+" is not in required")
			}
		}
		for _, r := range req {
			if _, ok := props[r.(string)]; !ok {
				out = append(out, fmt.Sprintf("required lists %v, which is not a property", r))
			}
		}
	})
	return out
}

func onlyKeywords(allowed ...string) func(Definition, map[string]any) []string {
	return func(_ Definition, s map[string]any) []string {
		var out []string
		walk(s, func(n map[string]any) {
			for k := range n {
				if !slices.Contains(allowed, k) {
					out = append(out, "unsupported keyword "+k)
				}
			}
		})
		return out
	}
}

func forbidKeywords(forbidden ...string) func(Definition, map[string]any) []string {
	return func(_ Definition, s map[string]any) []string {
		var out []string
		walk(s, func(n map[string]any) {
			for k := range n {
				if slices.Contains(forbidden, k) {
					out = append(out, "forbidden keyword "+k)
				}
			}
			if _, ok := n["type"].([]any); ok {
				out = append(out, "type is an array")
			}
		})
		return out
	}
}

func typesIn(allowed ...string) func(Definition, map[string]any) []string {
	return func(_ Definition, s map[string]any) []string {
		var out []string
		walk(s, func(n map[string]any) {
			t, ok := n["type"].(string)
			if !ok {
				out = append(out, fmt.Sprintf("type %v is not a single string", n["type"]))
				return
			}
			if !slices.Contains(allowed, t) {
				out = append(out, "type "+t+" is not supported")
			}
		})
		return out
	}
}

func sizeLimits(maxProps, maxDepth int) func(Definition, map[string]any) []string {
	return func(_ Definition, s map[string]any) []string {
		props, depth := 0, 0
		var rec func(n map[string]any, d int)
		rec = func(n map[string]any, d int) {
			depth = max(depth, d)
			if ps, ok := n["properties"].(map[string]any); ok {
				for _, p := range ps {
					props++
					if m, ok := p.(map[string]any); ok {
						rec(m, d+1)
					}
				}
			}
		}
		rec(s, 1)
		if props > maxProps || depth > maxDepth {
			return []string{fmt.Sprintf("%d properties, %d levels", props, depth)}
		}
		return nil
	}
}

func flat(_ Definition, s map[string]any) []string {
	var out []string
	props, _ := s["properties"].(map[string]any)
	for name, p := range props {
		switch p.(map[string]any)["type"] {
		case "string", "integer", "number", "boolean":
		default:
			out = append(out, fmt.Sprintf("property %s has type %v; the schema must be flat", name, p.(map[string]any)["type"]))
		}
	}
	return out
}
