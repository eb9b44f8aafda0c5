package compat_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
)

// rejection is a create body (POST shape) and the 400 it must get.
type rejection struct {
	name, body, code, param string
}

// fidelityRejections are the create bodies every transport must reject: one violation per row
// of protocol.CreateBounds (bodies under 64 KiB; the larger text limits are covered by the
// protocol package's tests) and the rejected values of protocol.CreateFields.
func fidelityRejections() []rejection {
	var rs []rejection
	for _, e := range protocol.BoundExamples() {
		if len(e.Body) < 64<<10 {
			rs = append(rs, rejection{e.Row, e.Body, e.Code, e.Param})
		}
	}
	time := `"tools":[{"type":"function","name":"get_time"}]`
	return append(rs,
		rejection{"top_logprobs", `{"model":"sim","input":"hi","top_logprobs":1}`, "unsupported_parameter", "top_logprobs"},
		rejection{"include logprobs", `{"model":"sim","input":"hi","include":["reasoning.encrypted_content","message.output_text.logprobs"]}`, "unsupported_parameter", "include[1]"},
		rejection{"obfuscation", `{"model":"sim","input":"hi","stream_options":{"include_obfuscation":true}}`, "unsupported_parameter", "stream_options.include_obfuscation"},
		rejection{"conversation", `{"model":"sim","input":"hi","conversation":"conv_1"}`, "unsupported_parameter", "conversation"},
		rejection{"prompt", `{"model":"sim","input":"hi","prompt":{"id":"pmpt_1"}}`, "unsupported_parameter", "prompt"},
		rejection{"context_management", `{"model":"sim","input":"hi","context_management":[{"type":"compaction","compact_threshold":1000}]}`, "unsupported_parameter", "context_management"},
		rejection{"prompt_cache_retention", `{"model":"sim","input":"hi","prompt_cache_retention":"24h"}`, "unsupported_parameter", "prompt_cache_retention"},
		rejection{"named tool not offered", `{"model":"sim","input":"hi",` + time + `,"tool_choice":{"type":"function","name":"get_weather"}}`, "invalid_value", "tool_choice.name"},
		rejection{"allowed tool not offered", `{"model":"sim","input":"hi",` + time + `,"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"get_time"},{"type":"function","name":"get_weather"}]}}`, "invalid_value", "tool_choice.tools[1].name"},
		rejection{"invalid schema", `{"model":"sim","input":"hi","text":{"format":{"type":"json_schema","name":"person","schema":{"type":"object","properties":{"age":{"type":"integr"}}}}}}`, "invalid_json_schema", "text.format.schema"},
		rejection{"schema with a file reference", `{"model":"sim","input":"hi","text":{"format":{"type":"json_schema","name":"x","schema":{"$ref":"file:///etc/passwd"}}}}`, "invalid_json_schema", "text.format.schema"},
		rejection{"schema missing", `{"model":"sim","input":"hi","text":{"format":{"type":"json_schema","name":"person"}}}`, "missing_required_parameter", "text.format.schema"},
	)
}

// asFrame turns a POST body into a response.create frame.
func asFrame(body string) string { return `{"type":"response.create",` + strings.TrimPrefix(body, "{") }

// TestFidelityRejectionsEveryTransport sends every rejection over HTTP, the public WebSocket
// and the append WebSocket, and checks status, code and param; each socket stays usable.
func TestFidelityRejectionsEveryTransport(t *testing.T) {
	f := newFixture(t, server.Options{})
	pub := f.dial(t)
	h := http.Header{}
	h.Set("OpenAI-Beta", server.AppendBeta)
	app := wstest.Dial(t, f.wsURL, h)
	for _, r := range fidelityRejections() {
		resp, err := http.Post(f.base+"/responses", "application/json", strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Error struct{ Code, Param string }
		}
		_ = json.Unmarshal(raw, &e)
		if resp.StatusCode != 400 || e.Error.Code != r.code || e.Error.Param != r.param {
			t.Errorf("HTTP %s: %d %s, want 400 %s param %s", r.name, resp.StatusCode, raw, r.code, r.param)
		}
		for _, c := range []*wstest.Client{pub, app} {
			c.SendRaw(asFrame(r.body))
			c.ExpectError(400, r.code, r.param)
		}
	}
	// One text-limit example at full size (10 MiB + 1 characters) over HTTP; the others of its
	// kind are checked by the protocol package's tests.
	for _, e := range protocol.BoundExamples() {
		if e.Row != "input" {
			continue
		}
		resp, err := http.Post(f.base+"/responses", "application/json", strings.NewReader(e.Body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(raw), `"string_above_max_length"`) {
			t.Errorf("HTTP input of 10 MiB + 1 characters: %d %.200s", resp.StatusCode, raw)
		}
	}
	for _, c := range []*wstest.Client{pub, app} {
		c.Send(create("still there?", map[string]any{"store": false}))
		c.Until("response.completed", "response.done")
	}
}

var clockTool = map[string]any{"type": "function", "name": "get_time", "description": "Time.", "parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}

// TestAllowedTools: with get_weather and get_time offered and allowed_tools [get_time], the
// sim calls get_time in mode required and auto, nothing in mode none; over WebSocket and HTTP.
func TestAllowedTools(t *testing.T) {
	f := newFixture(t, server.Options{})
	c := f.dial(t)
	choice := func(mode string) map[string]any {
		return map[string]any{"store": false, "tools": []any{weather, clockTool}, "tool_choice": map[string]any{
			"type": "allowed_tools", "mode": mode, "tools": []any{map[string]any{"type": "function", "name": "get_time"}}}}
	}
	for _, mode := range []string{"required", "auto", "none"} {
		fs := turn(t, c, create("What time is it in Paris?", choice(mode)))
		var names []string
		out, _ := final(fs).Get("response", "output").([]any)
		for _, it := range out {
			if m := wstest.Frame(it.(map[string]any)); m.Str("type") == "function_call" {
				names = append(names, m.Str("name"))
			}
		}
		want := "get_time"
		if mode == "none" {
			want = ""
		}
		if strings.Join(names, ",") != want {
			t.Errorf("mode %s: called %v, want %q", mode, names, want)
		}
		if tc := final(fs).Get("response", "tool_choice"); tc == nil || tc.(map[string]any)["type"] != "allowed_tools" {
			t.Errorf("mode %s: tool_choice not echoed: %v", mode, tc)
		}
	}
	body := choice("required")
	body["model"], body["input"] = "sim", "What time is it?"
	var r map[string]any
	httpJSON(t, "POST", f.base+"/responses", body, 200, &r)
	out := r["output"].([]any)
	if len(out) != 1 || out[0].(map[string]any)["name"] != "get_time" {
		t.Fatalf("HTTP allowed_tools required: output %v", out)
	}
}

var personFormat = map[string]any{"type": "json_schema", "name": "person", "strict": true, "schema": map[string]any{
	"type": "object", "additionalProperties": false, "required": []string{"name", "age"},
	"properties": map[string]any{"name": map[string]any{"type": "string"}, "age": map[string]any{"type": "integer", "minimum": 18}},
}}

// TestStructuredOutput: json_schema answers are JSON valid against the schema, streamed as text
// deltas (the public grammar check joins them); json_object answers are a JSON object.
func TestStructuredOutput(t *testing.T) {
	f := newFixture(t, server.Options{})
	c := f.dial(t)
	fs := turn(t, c, create("Describe Ada", map[string]any{"store": false, "text": map[string]any{"format": personFormat}}))
	validate(t, answer(fs), personFormat["schema"])
	deltas := 0
	for _, fr := range fs {
		if fr.Type() == "response.output_text.delta" {
			deltas++
		}
	}
	if deltas == 0 {
		t.Fatal("structured answer not streamed as deltas")
	}
	fs = turn(t, c, create("Describe Ada", map[string]any{"store": false, "text": map[string]any{"format": map[string]any{"type": "json_object"}}}))
	var obj map[string]any
	if err := json.Unmarshal([]byte(answer(fs)), &obj); err != nil {
		t.Fatalf("json_object answer is not an object: %q", answer(fs))
	}
	var r map[string]any
	httpJSON(t, "POST", f.base+"/responses", map[string]any{"model": "sim", "input": "Describe Ada", "text": map[string]any{"format": personFormat}}, 200, &r)
	msg := r["output"].([]any)[0].(map[string]any)
	validate(t, msg["content"].([]any)[0].(map[string]any)["text"].(string), personFormat["schema"])
}

func validate(t *testing.T, text string, schema any) {
	t.Helper()
	raw, _ := json.Marshal(schema)
	s, err := session.CompileSchema(raw)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("answer is not JSON: %q", text)
	}
	if err := s.Validate(v); err != nil {
		t.Fatalf("answer %s does not validate: %v", text, err)
	}
}

// TestAcceptedClientFields: what real clients send is accepted and echoed as requested —
// service_tier, include reasoning.encrypted_content, reasoning {effort minimal, summary},
// text.verbosity, prompt_cache_key, client_metadata, stream_options without obfuscation.
func TestAcceptedClientFields(t *testing.T) {
	f := newFixture(t, server.Options{})
	c := f.dial(t)
	fs := turn(t, c, create("hi", map[string]any{"store": false, "service_tier": "priority",
		"include": []string{"reasoning.encrypted_content"}, "reasoning": map[string]any{"effort": "minimal", "summary": "auto"},
		"text": map[string]any{"verbosity": "low"}, "prompt_cache_key": "thread-1", "client_metadata": map[string]any{"x": "y"},
		"stream_options": map[string]any{"include_obfuscation": false}, "prompt_cache_retention": "in-memory"}))
	for _, fr := range []wstest.Frame{fs[0], final(fs)} {
		if fr.Str("response", "service_tier") != "priority" || fr.Str("response", "reasoning", "effort") != "minimal" ||
			fr.Str("response", "text", "verbosity") != "low" || fr.Str("response", "prompt_cache_key") != "thread-1" {
			t.Fatalf("%s does not echo the request: %v", fr.Type(), fr.Get("response"))
		}
	}
}
