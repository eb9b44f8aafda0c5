package server

import (
	"encoding/json"
	"github.com/tetherd/tether/internal/wstest"
	"reflect"
	"testing"
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

// checkGrammar checks the append-shape grammar of one rollout's frames (architecture §4,
// reference §8.1): one contiguous sequence_number space from 0 including response.done; created
// then in_progress first; one output_index space; each item opened by output_item.added and
// closed by output_item.done before the next opens; deltas concatenate to the done text and
// arguments; response.done carries exactly the items since the previous suspension; the
// terminal Response's output equals every output_item.done item; nothing after the terminal.
func checkGrammar(t *testing.T, fs []wstest.Frame) {
	t.Helper()
	if len(fs) < 3 {
		t.Fatalf("rollout too short: %v", fs)
	}
	if fs[0].Type() != "response.created" || fs[1].Type() != "response.in_progress" {
		t.Fatalf("rollout must start with created, in_progress: %v %v", fs[0].Type(), fs[1].Type())
	}
	id := fs[0].Str("response", "id")
	var (
		open      = -1
		nextIndex = 0
		text      string
		doneItems []any
		sinceDone []any
		ids       = map[string]bool{}
	)
	for i, f := range fs {
		if f.Num("sequence_number") != i {
			t.Fatalf("frame %d (%s) has sequence_number %v", i, f.Type(), f.Get("sequence_number"))
		}
		switch f.Type() {
		case "response.output_item.added":
			if open != -1 {
				t.Fatalf("item %d opened while %d is open", f.Num("output_index"), open)
			}
			if f.Num("output_index") != nextIndex {
				t.Fatalf("output_index %d, want %d", f.Num("output_index"), nextIndex)
			}
			itemID := f.Str("item", "id")
			if ids[itemID] {
				t.Fatalf("duplicate item id %s", itemID)
			}
			ids[itemID] = true
			open, text = nextIndex, ""
		case "response.output_text.delta", "response.function_call_arguments.delta":
			if f.Num("output_index") != open {
				t.Fatalf("delta for %d while %d is open", f.Num("output_index"), open)
			}
			text += f.Str("delta")
		case "response.output_text.done":
			if f.Str("text") != text {
				t.Fatalf("text deltas %q != done text %q", text, f.Str("text"))
			}
		case "response.function_call_arguments.done":
			if f.Str("arguments") != text {
				t.Fatalf("argument deltas %q != done arguments %q", text, f.Str("arguments"))
			}
		case "response.output_item.done":
			if f.Num("output_index") != open {
				t.Fatalf("done for %d while %d is open", f.Num("output_index"), open)
			}
			open = -1
			nextIndex++
			doneItems = append(doneItems, f.Get("item"))
			sinceDone = append(sinceDone, f.Get("item"))
		case "response.done":
			if open != -1 {
				t.Fatalf("response.done while item %d is open", open)
			}
			if f.Str("response_id") != id {
				t.Fatalf("response.done for %s in rollout %s", f.Str("response_id"), id)
			}
			out, _ := f.Get("output").([]any)
			if !jsonEqual(out, sinceDone) {
				t.Fatalf("response.done output %v, want the items since the previous suspension %v", out, sinceDone)
			}
			if f.Get("usage") == nil {
				t.Fatalf("response.done without usage")
			}
			sinceDone = nil
		case "response.completed", "response.incomplete", "response.failed":
			if i != len(fs)-1 {
				t.Fatalf("frames after the terminal event")
			}
			if f.Str("response", "id") != id {
				t.Fatalf("terminal for another response")
			}
			out, _ := f.Get("response", "output").([]any)
			if !jsonEqual(out, doneItems) {
				t.Fatalf("terminal output %v != output_item.done items %v", out, doneItems)
			}
		}
	}
}

func jsonEqual(a, b []any) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	var u, v any
	_ = json.Unmarshal(x, &u)
	_ = json.Unmarshal(y, &v)
	return reflect.DeepEqual(u, v)
}
