package protocol

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/skipnote"
)

// The Open Responses OpenAPI schema is read from a directory beside the repository (it is
// not copied into it).
const schemaFile = "../../shared/reference/openresponses-openapi-2026-04-24.json"

// loadSchemaDoc returns the schema's components.schemas, skipping loudly outside CI when the
// file is absent.
func loadSchemaDoc(t *testing.T) map[string]map[string]any {
	t.Helper()
	b, err := os.ReadFile(schemaFile)
	if err != nil {
		if os.IsNotExist(err) && os.Getenv("CI") == "" {
			skipnote.Skip(t, fmt.Sprintf("the Open Responses schema is not beside the checkout (%v)", err))
		}
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Components.Schemas
}

// constraint is one bound found in the schema.
type constraint struct {
	param, keyword string
	value          any
}

// schemaConstraints walks node (following $refs, each once per path) and collects every
// numeric bound, length or count limit, pattern and enum below param. Single-valued enums of
// "type" members discriminate union members and are skipped.
func schemaConstraints(defs map[string]map[string]any, node any, param string, seen map[string]bool, out *[]constraint) {
	m, ok := node.(map[string]any)
	if !ok {
		return
	}
	if ref, ok := m["$ref"].(string); ok {
		name := ref[strings.LastIndex(ref, "/")+1:]
		if seen[name] {
			return
		}
		seen[name] = true
		schemaConstraints(defs, defs[name], param, seen, out)
		delete(seen, name)
		return
	}
	for _, kw := range []string{"minimum", "maximum", "maxLength", "minLength", "maxItems", "minItems", "maxProperties", "pattern"} {
		if v, ok := m[kw]; ok {
			*out = append(*out, constraint{param, kw, v})
		}
	}
	if e, ok := m["enum"].([]any); ok && !(len(e) == 1 && strings.HasSuffix(param, "type")) {
		*out = append(*out, constraint{param, "enum", e})
	}
	for _, kw := range []string{"anyOf", "oneOf", "allOf"} {
		list, _ := m[kw].([]any)
		for _, sub := range list {
			schemaConstraints(defs, sub, param, seen, out)
		}
	}
	props, _ := m["properties"].(map[string]any)
	for name, sub := range props {
		p := name
		if param != "" {
			p = param + "." + name
		}
		schemaConstraints(defs, sub, p, seen, out)
	}
	if items, ok := m["items"]; ok {
		schemaConstraints(defs, items, param+"[]", seen, out)
	}
	if ap, ok := m["additionalProperties"].(map[string]any); ok {
		schemaConstraints(defs, ap, param+".*", seen, out)
	}
}

// covers reports whether row enforces c.
func covers(row *Bound, c constraint) bool {
	if row.Param != c.param {
		return false
	}
	num, _ := c.value.(float64)
	switch c.keyword {
	case "minimum":
		return (row.Kind == BoundInteger || row.Kind == BoundDecimal) && row.HasMin && row.Min == num
	case "maximum":
		return (row.Kind == BoundInteger || row.Kind == BoundDecimal) && row.HasMax && row.Max == num
	case "maxLength":
		return row.Kind == BoundLength && row.HasMax && row.Max == num
	case "minLength":
		return row.Kind == BoundLength && row.HasMin && row.Min == num
	case "maxItems":
		return row.Kind == BoundItems && row.HasMax && row.Max == num
	case "minItems":
		return row.Kind == BoundItems && row.HasMin && row.Min == num
	case "maxProperties":
		return row.Kind == BoundProperties && row.HasMax && row.Max == num
	case "pattern":
		return row.Kind == BoundPattern && row.Pattern == c.value
	case "enum":
		if row.Kind != BoundEnum {
			return false
		}
		for _, v := range c.value.([]any) {
			if s, ok := v.(string); !ok || !slices.Contains(row.Enum, s) {
				return false
			}
		}
		return true
	}
	return false
}

// TestCreateBoundsCoverSchema fails when a bound of the schema's CreateResponseBody has no row
// in CreateBounds.
func TestCreateBoundsCoverSchema(t *testing.T) {
	defs := loadSchemaDoc(t)
	var found []constraint
	schemaConstraints(defs, defs["CreateResponseBody"], "", map[string]bool{}, &found)
	if len(found) < 40 {
		t.Fatalf("the walk found only %d constraints: the schema changed shape?", len(found))
	}
	for _, c := range found {
		ok := false
		for i := range CreateBounds {
			if covers(&CreateBounds[i], c) {
				ok = true
				break
			}
		}
		if !ok {
			t.Errorf("schema bound %s %s %v has no row in CreateBounds", c.param, c.keyword, c.value)
		}
	}
}

// TestCreateFieldsCoverSchema fails when a property of CreateResponseBody has no row in
// CreateFields, and checks that docs/fields.md carries every row.
func TestCreateFieldsCoverSchema(t *testing.T) {
	defs := loadSchemaDoc(t)
	props, _ := defs["CreateResponseBody"]["properties"].(map[string]any)
	if len(props) == 0 {
		t.Fatal("CreateResponseBody has no properties")
	}
	rows := map[string]FieldStatus{}
	for _, f := range CreateFields {
		if _, dup := rows[f.Name]; dup {
			t.Errorf("two rows for %s", f.Name)
		}
		rows[f.Name] = f
	}
	for name := range props {
		if _, ok := rows[name]; !ok {
			t.Errorf("field %s of CreateResponseBody has no row in CreateFields", name)
		}
	}
	doc, err := os.ReadFile("../docs/fields.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range CreateFields {
		if line := FieldRow(f); !strings.Contains(string(doc), line) {
			t.Errorf("docs/fields.md lacks the row\n%s", line)
		}
	}
}

// TestBoundViolations checks each kind's code, param and message on DecodeCreateParams.
func TestBoundViolations(t *testing.T) {
	examples := BoundExamples()
	for _, row := range CreateBounds {
		if !slices.ContainsFunc(examples, func(e BoundExample) bool { return e.Row == row.Param }) {
			t.Errorf("row %s has no example in BoundExamples", row.Param)
		}
	}
	for _, tc := range examples {
		if raceEnabled && len(tc.Body) > 1<<20 {
			continue
		}
		_, err := DecodeCreateParams(context.Background(), []byte(tc.Body))
		if err == nil || err.Code != tc.Code || err.Param != tc.Param || err.Status != 400 {
			t.Errorf("%s: %.120s: got %v, want %s param %s", tc.Row, tc.Body, err, tc.Code, tc.Param)
		}
	}
	for _, ok := range []string{
		`{"model":"m","max_output_tokens":16,"temperature":2,"top_p":0,"presence_penalty":-2,"frequency_penalty":2,"top_logprobs":0}`,
		`{"model":"m","reasoning":{"effort":"minimal","summary":"auto"},"service_tier":"priority","include":["reasoning.encrypted_content"]}`,
		`{"model":"m","tools":[{"type":"function","name":"get_time"},{"type":"custom","name":"apply_patch"}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"custom","name":"apply_patch"}]}}`,
		`{"model":"m","stream_options":{"include_obfuscation":false},"prompt_cache_retention":"in-memory","conversation":null}`,
	} {
		if _, err := DecodeCreateParams(context.Background(), []byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// TestCheckTextLength: CheckTextLength counts characters, not bytes, and words its error as
// the create's bound on an input text does.
func TestCheckTextLength(t *testing.T) {
	if err := CheckTextLength("p", strings.Repeat("é", MaxTextLength)); err != nil { // 2 bytes each
		t.Fatalf("%d characters: %v", MaxTextLength, err)
	}
	err := CheckTextLength("messages[3].content", strings.Repeat("é", MaxTextLength+1))
	if err == nil || err.Status != 400 || err.Code != CodeStringAboveMaxLength || err.Param != "messages[3].content" {
		t.Fatalf("%d characters: %+v", MaxTextLength+1, err)
	}
	_, want := DecodeCreateParams(context.Background(), []byte(`{"model":"m","input":"`+strings.Repeat("x", MaxTextLength+1)+`"}`))
	if want == nil || err.Message != strings.Replace(want.Message, "'input'", "'messages[3].content'", 1) {
		t.Fatalf("message %q, the create's %+v", err.Message, want)
	}
}
