package compat_test

import (
	"context"
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/protocol"
)

// TestResponseFramesArePlainEncoding: over a real socket, every response.created,
// response.in_progress and response.completed frame of a multi-turn WebSocket chain (tools,
// instructions, metadata, text.format, reasoning; hot turns, and settings changed midway)
// is byte for byte what protocol.AppendEvent makes, without Event.Settings, of the Response
// built the plain way: protocol.NewResponse of the request as decoded, with the frame's own id,
// created_at, and, when it ended, protocol.Finish with the frame's status, completed_at,
// output and usage.
func TestResponseFramesArePlainEncoding(t *testing.T) {
	f := newFixture(t, server.Options{})
	c := f.dial(t)
	base := map[string]any{
		"store": false, "tools": []any{shell, weather, clockTool}, "tool_choice": "auto",
		"instructions": "You are a careful agent.\nUse the tools; quote \"them\" <exactly>.",
		"metadata":     map[string]string{"run": "r1", "z": "<&>", "a": "é\u2028"},
		"text":         map[string]any{"format": map[string]any{"type": "text"}, "verbosity": "low"},
		"reasoning":    map[string]any{"effort": "low", "summary": "auto"},
		"temperature":  0.25, "top_p": 0.9, "max_output_tokens": 4000, "max_tool_calls": 50, "presence_penalty": 0.5,
	}
	with := func(extra map[string]any) map[string]any {
		m := maps.Clone(base)
		maps.Copy(m, extra)
		return m
	}
	changed := map[string]any{"instructions": "Now be brief.", "metadata": map[string]string{"run": "r2"},
		"text": map[string]any{"format": map[string]any{"type": "json_object"}}, "reasoning": map[string]any{"effort": "high"}}
	hot0, cold0 := f.srv.Counters().Hot.Load(), f.srv.Counters().Cold.Load()

	prev, pending := "", []string(nil)
	frames := 0
	for i, step := range []struct {
		user  string         // a user message, or "" for the outputs of the pending calls
		extra map[string]any // settings over base
	}{
		{"Check the disk usage.", nil},
		{"", nil},
		{"And the weather in Paris?", map[string]any{"prompt_cache_key": "k1", "user": "u1"}}, // not settings: hot
		{"", map[string]any{"prompt_cache_key": "k2", "safety_identifier": "s1", "service_tier": "flex"}},
		{"What time is it in Tokyo?", changed}, // settings changed: cold
		{"", changed},
		{"Once more, the disk.", changed},
		{"", changed},
	} {
		var input []any
		if step.user != "" {
			input = []any{userMsg(step.user)}
		}
		for _, id := range pending {
			input = append(input, toolOutput(id, "done: 42% used, \"ok\"\n"))
		}
		msg := create(input, with(step.extra))
		if prev != "" {
			msg["previous_response_id"] = prev
		}
		req, err := json.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		p, perr := protocol.DecodeCreateParams(context.Background(), req)
		if perr != nil {
			t.Fatalf("turn %d: %v", i, perr)
		}
		c.SendRaw(string(req))
		var last wireFrame
		for last.Type != string(protocol.EventCompleted) {
			data := readRaw(t, c.C)
			if err := json.Unmarshal(data, &last); err != nil {
				t.Fatalf("turn %d: %v: %s", i, err, data)
			}
			switch protocol.EventType(last.Type) {
			case protocol.EventCreated, protocol.EventInProgress, protocol.EventCompleted:
			case protocol.EventIncomplete, protocol.EventFailed, protocol.EventError:
				t.Fatalf("turn %d: %s", i, data)
			default:
				continue
			}
			frames++
			if want := last.plain(t, p); string(data) != string(want) {
				t.Fatalf("turn %d %s:\n got %s\nwant %s", i, last.Type, data, want)
			}
		}
		prev = last.Response.ID
		pending = pending[:0]
		for _, it := range last.output(t) {
			if it.Type == protocol.ItemFunctionCall {
				pending = append(pending, it.CallID)
			}
		}
		if (step.user != "") != (len(pending) > 0) {
			t.Fatalf("turn %d: the sim called %v, want a call after each user message only", i, pending)
		}
	}
	hot, cold := f.srv.Counters().Hot.Load()-hot0, f.srv.Counters().Cold.Load()-cold0
	if hot != 6 || cold != 1 || frames != 3*8 {
		t.Fatalf("hot %d, cold %d, frames %d: want 6, 1 and 24", hot, cold, frames)
	}
}

// wireFrame is what a response event frame says beyond its request: the members its turn
// sets.
type wireFrame struct {
	Type     string `json:"type"`
	Sequence int    `json:"sequence_number"`
	Response struct {
		ID          string          `json:"id"`
		CreatedAt   int64           `json:"created_at"`
		CompletedAt *int64          `json:"completed_at"`
		Status      string          `json:"status"`
		Output      json.RawMessage `json:"output"`
		Usage       *protocol.Usage `json:"usage"`
	} `json:"response"`
}

func (w *wireFrame) output(t *testing.T) []protocol.Item {
	t.Helper()
	var items []protocol.Item
	if err := json.Unmarshal(w.Response.Output, &items); err != nil {
		t.Fatalf("%s output: %v", w.Type, err)
	}
	return items
}

// plain is the frame's event encoded from the Response of the request p, built and encoded
// without Event.Settings.
func (w *wireFrame) plain(t *testing.T, p *protocol.CreateParams) []byte {
	t.Helper()
	r := protocol.NewResponse(w.Response.ID, p, w.Response.CreatedAt)
	if w.Response.Status != protocol.ResponseInProgress {
		if w.Response.Usage == nil || w.Response.CompletedAt == nil {
			t.Fatalf("%s without usage or completed_at", w.Type)
		}
		r = protocol.Finish(r, w.Response.Status, "", nil, w.output(t), *w.Response.Usage, *w.Response.CompletedAt)
	}
	ev := protocol.Event{Type: protocol.EventType(w.Type), SequenceNumber: w.Sequence, Response: &r}
	return protocol.AppendEvent(nil, &ev)
}

// readRaw reads one text frame's bytes within 10 seconds.
func readRaw(t *testing.T, c *websocket.Conn) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	typ, data, err := c.Read(ctx)
	if err != nil || typ != websocket.MessageText {
		t.Fatalf("read: %v (%v)", err, typ)
	}
	return data
}
