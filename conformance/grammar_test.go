package conformance_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tetherd/tether/conformance"
)

// frames decodes one JSON object per line.
func frames(t *testing.T, lines ...string) []conformance.Frame {
	t.Helper()
	var fs []conformance.Frame
	for _, l := range lines {
		var f conformance.Frame
		if err := json.Unmarshal([]byte(l), &f); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		fs = append(fs, f)
	}
	return fs
}

const (
	created    = `{"type":"response.created","sequence_number":%d,"response":{"id":"resp_%s","status":"in_progress","output":[]}}`
	itemAdded  = `{"type":"response.output_item.added","sequence_number":%d,"output_index":%d,"item":{"id":"fc_%s","type":"function_call","call_id":"call_%s","name":"f","arguments":""}}`
	argsDelta  = `{"type":"response.function_call_arguments.delta","sequence_number":%d,"output_index":%d,"item_id":"fc_%s","delta":"{}"}`
	argsDone   = `{"type":"response.function_call_arguments.done","sequence_number":%d,"output_index":%d,"item_id":"fc_%s","arguments":"{}"}`
	itemDone   = `{"type":"response.output_item.done","sequence_number":%d,"output_index":%d,"item":{"id":"fc_%s","type":"function_call","call_id":"call_%s","name":"f","arguments":"{}"}}`
	respDone   = `{"type":"response.done","sequence_number":%d,"response_id":"resp_%s","output":[{"id":"fc_%s","type":"function_call","call_id":"call_%s","name":"f","arguments":"{}"}],"pending_call_ids":["call_%s"],"usage":{"input_tokens":%d,"output_tokens":1,"total_tokens":%d}}`
	completed2 = `{"type":"response.completed","sequence_number":%d,"response":{"id":"resp_%s","status":"completed","output":[%s,%s],"usage":{"input_tokens":9,"output_tokens":2,"total_tokens":11}}}`
)

// call is the frames of one function_call item at output_index n from sequence_number seq.
func call(seq, n int, id string) []string {
	return []string{
		fmt.Sprintf(itemAdded, seq, n, id, id),
		fmt.Sprintf(argsDelta, seq+1, n, id),
		fmt.Sprintf(argsDone, seq+2, n, id),
		fmt.Sprintf(itemDone, seq+3, n, id, id),
	}
}

// appendRollout is an append-shape rollout: two tool calls, one suspension each, then done.
func appendRollout(id string) []string {
	item := func(c string) string {
		return fmt.Sprintf(`{"id":"fc_%s","type":"function_call","call_id":"call_%s","name":"f","arguments":"{}"}`, c, c)
	}
	lines := []string{fmt.Sprintf(created, 0, id)}
	lines = append(lines, call(1, 0, id+"a")...)
	lines = append(lines, fmt.Sprintf(respDone, 5, id, id+"a", id+"a", id+"a", 5, 6))
	lines = append(lines, call(6, 1, id+"b")...)
	lines = append(lines, fmt.Sprintf(respDone, 10, id, id+"b", id+"b", id+"b", 8, 9))
	return append(lines, fmt.Sprintf(completed2, 11, id, item(id+"a"), item(id+"b")))
}

func TestGrammarAcceptsAnAppendRollout(t *testing.T) {
	g := conformance.NewGrammar(conformance.ShapeAppend)
	for _, f := range frames(t, appendRollout("x")...) {
		if err := g.Feed(f); err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		if f.Type() == "response.done" {
			g.Appended(f.Str("response_id"))
		}
	}
	if err := g.Done(); err != nil {
		t.Fatal(err)
	}
}

func TestGrammarRejects(t *testing.T) {
	good := appendRollout("x")
	for _, tc := range []struct {
		name  string
		shape string
		lines []string
		want  string // in the Feed error, or in the Done error when the frames all pass
	}{
		{"a sequence_number gap", conformance.ShapeAppend, append([]string{good[0]}, good[2:]...), "sequence_number 2, want 1"},
		{"response.done on the public shape", conformance.ShapePublic, good, "not an event of the public shape"},
		{"output after response.done without an append", conformance.ShapeAppend, good[:7], "while no response is sampling"},
		{"no terminal event", conformance.ShapeAppend, good[:4], "has no terminal event"},
		{"an error frame with a sequence_number", conformance.ShapePublic,
			[]string{`{"type":"error","status":400,"sequence_number":0,"error":{"type":"invalid_request_error","code":"x","message":"m","param":null}}`}, "carries a sequence_number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := conformance.NewGrammar(tc.shape)
			var err error
			for _, f := range frames(t, tc.lines...) {
				if err = g.Feed(f); err != nil {
					break
				}
			}
			if err == nil {
				err = g.Done()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestGrammarDoneAcceptsASuspendedRollout(t *testing.T) {
	g := conformance.NewGrammar(conformance.ShapeAppend)
	for _, f := range frames(t, appendRollout("y")[:6]...) {
		if err := g.Feed(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Done(); err != nil {
		t.Fatalf("a rollout suspended at response.done: %v", err)
	}
	g.Appended("resp_y")
	if err := g.Done(); err == nil {
		t.Fatal("an appended rollout that sent no output passed Done")
	}
}

func TestNewGrammarPanicsOnAnUnknownShape(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	conformance.NewGrammar(conformance.ShapeBoth)
}
