package server

import (
	"testing"

	"github.com/tetherd/tether/conformance"
	"github.com/tetherd/tether/internal/wstest"
)

// rollout drives one append-shape rollout to its terminal event: at each response.done it
// appends one function_call_output per pending call, made by output(callID, arguments).
// It returns every frame of the rollout and checks its grammar.
func rollout(t *testing.T, c *wstest.Client, create map[string]any, output func(callID, args string) string) []wstest.Frame {
	t.Helper()
	c.Send(create)
	var all []wstest.Frame
	args := map[string]string{}
	for {
		fs := c.Until("response.done", "response.completed", "response.incomplete", "response.failed")
		all = append(all, fs...)
		last := fs[len(fs)-1]
		for _, f := range fs {
			if f.Type() == "response.output_item.done" && f.Str("item", "type") == "function_call" {
				args[f.Str("item", "call_id")] = f.Str("item", "arguments")
			}
		}
		if last.Type() != "response.done" {
			checkGrammar(t, all)
			return all
		}
		var input []any
		for _, id := range pendingIDs(last) {
			input = append(input, map[string]any{"type": "function_call_output", "call_id": id, "output": output(id, args[id])})
		}
		c.Send(map[string]any{"type": "response.append", "response_id": last.Str("response_id"), "input": input})
	}
}

func pendingIDs(f wstest.Frame) []string {
	var ids []string
	list, _ := f.Get("pending_call_ids").([]any)
	for _, v := range list {
		s, _ := v.(string)
		ids = append(ids, s)
	}
	return ids
}

// checkGrammar checks one append-shape rollout's frames with the conformance suite's grammar
// (wstest.CheckGrammar), and that Tether opens it with response.created then
// response.in_progress.
func checkGrammar(t *testing.T, fs []wstest.Frame) {
	t.Helper()
	if len(fs) < 2 || fs[0].Type() != "response.created" || fs[1].Type() != "response.in_progress" {
		t.Fatalf("rollout must start with created, in_progress: %v", fs)
	}
	wstest.CheckGrammar(t, conformance.ShapeAppend, fs)
}
