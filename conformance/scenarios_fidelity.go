package conformance

import (
	"fmt"
	"net/http"
	"strings"
)

// errOutOfRange: numbers, enums and lengths outside the Open Responses schema's bounds (and
// OpenAI's documented ranges) get OpenAI's codes, with the value's path as param.
func errOutOfRange(t *T) {
	p := t.dial()
	for _, c := range []struct {
		extra       M
		code, param string
	}{
		{M{"max_output_tokens": 1}, "integer_below_min_value", "max_output_tokens"},
		{M{"top_logprobs": 21}, "integer_above_max_value", "top_logprobs"},
		{M{"temperature": 3}, "decimal_above_max_value", "temperature"},
		{M{"top_p": -0.5}, "decimal_below_min_value", "top_p"},
		{M{"prompt_cache_key": strings.Repeat("k", 65)}, "string_above_max_length", "prompt_cache_key"},
		{M{"reasoning": M{"effort": "extreme"}}, "invalid_value", "reasoning.effort"},
		{M{"service_tier": "cheapest"}, "invalid_value", "service_tier"},
	} {
		p.send(t.create("hi", c.extra))
		p.expectError(400, c.code, c.param)
	}
	p.stillUsable()
}

// compactWindow: POST /responses/compact needs model; it returns a response.compaction whose
// output, sent as the input of a new chain, completes (with the sim: with the same context as
// the uncompacted input); an altered compaction item is 400 naming its input index.
func compactWindow(t *T) {
	st, f, raw := t.httpJSON("POST", "/responses/compact", M{"input": "hi"})
	t.expectHTTPError("compact without model", st, f, raw, http.StatusBadRequest, "missing_required_parameter", "model")
	first := M{"type": "message", "role": "user", "content": "Remember the code word: cobalt"}
	second := M{"type": "message", "role": "user", "content": "What is the code word?"}
	st, cr, raw := t.httpJSON("POST", "/responses/compact", M{"model": t.cfg.Model, "input": []any{first}})
	t.check(st == http.StatusOK && cr.Str("object") == "response.compaction" && cr.Str("id") != "" && len(cr.List("output")) > 0,
		"compact: %d %s", st, clip(string(raw), 400))
	window := cr.List("output")
	var cmp M
	for _, it := range window {
		if m, ok := it.(map[string]any); ok && m["type"] == "compaction" {
			cmp = m
		}
	}
	t.check(cmp != nil && cmp["encrypted_content"] != "", "compact output has no compaction item: %s", clip(string(raw), 400))
	via := t.postResponse(M{"model": t.cfg.Model, "store": false, "input": append(append([]any{}, window...), second)})
	t.check(via.Str("status") == "completed", "a chain from the compacted window: %s", clip(via.String(), 300))
	if t.sim("a chain from a compacted window has the original context (fingerprint)") {
		direct := t.postResponse(M{"model": t.cfg.Model, "store": false, "input": []any{first, second}})
		a, b := fingerprint(outputText(direct)), fingerprint(outputText(via))
		t.check(a != "" && a == b, "compacted context %q differs from the original %q", b, a)
	}
	bad := M{"type": "compaction", "encrypted_content": fmt.Sprint(cmp["encrypted_content"]) + "x"}
	st, f, raw = t.httpJSON("POST", "/responses", M{"model": t.cfg.Model, "store": false, "input": []any{second, bad}})
	if st != http.StatusBadRequest || f.Obj("error").Str("param") != "input[1]" {
		t.fail(&Failure{Message: "an altered compaction item was not rejected", Expected: `400 {"error":{"param":"input[1]"}}`,
			Received: fmt.Sprintf("%d %s", st, clip(string(raw), 300))})
	}
}

// outputText returns the text of a Response's first message.
func outputText(r Frame) string {
	for _, it := range r.List("output") {
		m := Frame(it.(map[string]any))
		if m.Str("type") == "message" {
			for _, p := range m.List("content") {
				if s, ok := p.(map[string]any)["text"].(string); ok {
					return s
				}
			}
		}
	}
	return ""
}
