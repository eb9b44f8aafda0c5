package sim

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tetherd/tether/protocol"
	. "github.com/tetherd/tether/sampler"
)

// jsonSchemaFormat is a text.format json_schema of schema.
func jsonSchemaFormat(schema string) json.RawMessage {
	return json.RawMessage(`{"type":"json_schema","name":"out","schema":` + schema + `}`)
}

// nestedArrays is a small schema whose smallest valid value is huge: arrays of 100 arrays,
// depth levels deep, of strings.
func nestedArrays(depth int) string {
	s := `{"type":"string"}`
	for range depth {
		s = `{"type":"array","minItems":100,"items":` + s + `}`
	}
	return s
}

// TestSynthBoundedByMaxOutputTokens: a schema that asks for a huge value (100^5 nested array
// elements, or a 300,000-character string) costs what the step may stream: with
// max_output_tokens the step ends incomplete at it, without it the value is cut at the sim's
// cap (incomplete too); a string the cap allows is written whole, in linear time.
func TestSynthBoundedByMaxOutputTokens(t *testing.T) {
	u := userMsg("give me data")
	out, res := sampleOnce(t, Settings{MaxOutputTokens: 50, TextFormat: jsonSchemaFormat(nestedArrays(5))}, u)
	if res.Incomplete != protocol.ReasonMaxOutputTokens || res.OutputTokens != 50 || countTokens(out.text.String()) > 50 {
		t.Fatalf("with max_output_tokens 50: %+v, %d bytes streamed", res, out.text.Len())
	}
	out, res = sampleOnce(t, Settings{TextFormat: jsonSchemaFormat(nestedArrays(5))}, u)
	if res.Incomplete != protocol.ReasonMaxOutputTokens || out.text.Len() > maxSynthBytes || out.text.Len() < maxSynthBytes/2 {
		t.Fatalf("without max_output_tokens: %+v, %d bytes streamed (cap %d)", res, out.text.Len(), maxSynthBytes)
	}

	long := `{"type":"object","required":["s"],"properties":{"s":{"type":"string","minLength":300000}}}`
	out, res = sampleOnce(t, Settings{MaxOutputTokens: 20, TextFormat: jsonSchemaFormat(long)}, u)
	if res.Incomplete != protocol.ReasonMaxOutputTokens || res.OutputTokens != 20 || countTokens(out.text.String()) > 20 {
		t.Fatalf("minLength 300000 at max_output_tokens 20: %+v, %d bytes streamed", res, out.text.Len())
	}
	out, res = sampleOnce(t, Settings{TextFormat: jsonSchemaFormat(long)}, u)
	var v struct{ S string }
	if res.Incomplete != "" || json.Unmarshal([]byte(out.text.String()), &v) != nil || len([]rune(v.S)) < 300000 || len(v.S) > 300000+len("data")+1 {
		t.Fatalf("minLength 300000: %+v, a %d-character string", res, len([]rune(v.S)))
	}

	// A tool's arguments are bounded alike.
	tool := fnTool("fill", `{"type":"object","required":["rows"],"properties":{"rows":`+nestedArrays(5)+`}}`)
	out, res = sampleOnce(t, Settings{MaxOutputTokens: 30, Tools: []protocol.Tool{tool}}, u)
	if res.Incomplete != protocol.ReasonMaxOutputTokens || len(out.calls) != 1 || len(out.calls[0].Arguments) > 30*maxTokenBytes {
		t.Fatalf("arguments at max_output_tokens 30: %+v, %d calls", res, len(out.calls))
	}
}

// TestSynthRefCycle: $refs that loop through anyOf (valid JSON Schema) end in a value, not in
// unbounded recursion.
func TestSynthRefCycle(t *testing.T) {
	for _, schema := range []string{
		`{"$defs":{"x":{"anyOf":[{"$ref":"#/$defs/x"}]}},"$ref":"#/$defs/x"}`,
		`{"anyOf":[{"$ref":"#"}]}`,
		`{"oneOf":[{"allOf":[{"$ref":"#"}]}]}`,
	} {
		out, res := sampleOnce(t, Settings{TextFormat: jsonSchemaFormat(schema)}, userMsg("x"))
		if res.Incomplete != "" || !json.Valid([]byte(out.text.String())) {
			t.Errorf("%s: %+v, answer %q", schema, res, out.text.String())
		}
	}
	if got := repeatWord("ab", 7, 1<<20); got != "ab ab ab" {
		t.Fatalf("repeatWord = %q", got)
	}
	if got := repeatWord("ab", 1000, 10); len(got) > 10+len(" ab") || !strings.HasPrefix(got, "ab ab") {
		t.Fatalf("repeatWord past its room = %q", got)
	}
}
