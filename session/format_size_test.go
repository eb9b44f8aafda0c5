package session

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// objectOf returns a schema object with n string properties.
func objectOf(n int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d":{"type":"string"}`, i)
	}
	b.WriteString(`}}`)
	return b.String()
}

// TestCheckSchemaSize: each bound admits a schema at it and refuses one past it, naming the
// bound.
func TestCheckSchemaSize(t *testing.T) {
	nested := func(levels int) string {
		s := `{"type":"string"}`
		for range levels {
			s = `{"type":"array","items":` + s + `}`
		}
		return s
	}
	anyOf := func(n int) string {
		return `{"anyOf":[` + strings.Repeat(`{"type":"null"},`, n-1) + `{"type":"null"}]}`
	}
	enum := func(n int) string { return `{"enum":[` + strings.Repeat(`1,`, n-1) + `1]}` }
	for _, tc := range []struct {
		name, schema, says string
	}{
		{"properties at the bound", objectOf(MaxSchemaProperties), ""},
		{"properties past it", objectOf(MaxSchemaProperties + 1), "more than 5000 properties"},
		{"properties over two objects", `{"type":"object","properties":{"a":` + objectOf(2500) + `,"b":` + objectOf(2500) + `}}`, "more than 5000 properties"},
		{"a property named properties", `{"type":"object","properties":{"properties":{"type":"string"}}}`, ""},
		{"objects past the bound", anyOf(MaxSchemaObjects), "more than 10000 JSON objects"},
		{"values past the bound", enum(MaxSchemaValues), "more than 100000 JSON values"},
		{"nesting at the bound", nested(MaxSchemaNesting - 1), ""},
		{"nesting past it", nested(MaxSchemaNesting), "nests more than 64 levels"},
		{"malformed", `{"type":`, ""},
	} {
		err := CheckSchemaSize(json.RawMessage(tc.schema))
		if tc.says == "" && err != nil || tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.says)
		}
	}
}
