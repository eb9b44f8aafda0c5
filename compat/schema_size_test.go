package compat_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/server"
)

// TestHugeFormatSchemaRefused: a text.format schema over the property bound (6,000 properties
// here; 80,000 took 52 CPU-seconds to compile before the bound) is refused before compilation
// with a 400 naming the bound, over HTTP and over WebSocket; a small schema runs.
func TestHugeFormatSchemaRefused(t *testing.T) {
	f := newFixture(t, server.Options{})
	props := map[string]any{}
	for i := range 6000 {
		props[fmt.Sprintf("property_%d", i)] = map[string]any{"type": "string"}
	}
	format := func(p map[string]any) map[string]any {
		return map[string]any{"format": map[string]any{"type": "json_schema", "name": "huge",
			"schema": map[string]any{"type": "object", "properties": p}}}
	}
	status, body := post(t, f.base+"/responses", "sk-test", map[string]any{"model": "sim", "input": "hi", "text": format(props)})
	if status != 400 || body.Str("error", "code") != "invalid_json_schema" || body.Str("error", "param") != "text.format.schema" ||
		!strings.Contains(body.Str("error", "message"), "more than 5000 properties") {
		t.Fatalf("6,000 properties over HTTP: %d %v", status, body)
	}
	c := f.dial(t)
	c.Send(create("hi", map[string]any{"text": format(props)}))
	c.ExpectError(400, "invalid_json_schema", "text.format.schema")

	small := map[string]any{"answer": map[string]any{"type": "string"}}
	status, body = post(t, f.base+"/responses", "sk-test", map[string]any{"model": "sim", "input": "hi", "text": format(small)})
	if status != 200 || body.Str("status") != "completed" {
		t.Fatalf("a small schema: %d %v", status, body)
	}
}
