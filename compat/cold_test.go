package compat_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/session"
)

// coldLog records the "continuation went cold" log lines, with their level and attributes.
type coldLog struct {
	mu    sync.Mutex
	lines []map[string]string // attributes, plus "level"
}

func (l *coldLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *coldLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "continuation went cold" {
		return nil
	}
	m := map[string]string{"level": r.Level.String()}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	l.mu.Lock()
	l.lines = append(l.lines, m)
	l.mu.Unlock()
	return nil
}

func (l *coldLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *coldLog) WithGroup(string) slog.Handler      { return l }

// of returns the line logged for response id (logged before its response.created is sent).
func (l *coldLog) of(id string) map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.lines {
		if m["response"] == id {
			return m
		}
	}
	return nil
}

// TestColdContinuationSaysWhy: every way a public-shape continuation misses the hot path is
// logged at debug level with its reason (and the setting that differs), counted by reason in
// /metrics, and leaves the public events as the Open Responses schema has them (no extra
// member on response.created).
func TestColdContinuationSaysWhy(t *testing.T) {
	log := &coldLog{}
	s, base := servertest.Start(t, server.Options{Logger: slog.New(log), Limits: session.Limits{MaxSuspended: 3}})
	f := &fixture{srv: s, base: base + "/v1", wsURL: "ws" + base[len("http"):] + "/v1/responses"}
	tools := map[string]any{"store": false, "tools": []any{shell}, "metadata": map[string]string{"tag": "a"}}
	with := func(prev string, extra map[string]any) map[string]any {
		m := map[string]any{"previous_response_id": prev}
		for k, v := range tools {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	type result struct {
		reason, setting string
	}
	check := func(name string, fs []wstest.Frame, want result) {
		t.Helper()
		if fs[0].Type() != "response.created" || fs[0].Get("continuation") != nil {
			t.Errorf("%s: first event %v: want response.created without a continuation member", name, fs[0])
		}
		if final(fs).Type() != "response.completed" {
			t.Errorf("%s: %v", name, final(fs))
		}
		got := log.of(respID(fs))
		if got == nil {
			t.Errorf("%s: no log line for %s", name, respID(fs))
			return
		}
		if got["level"] != "DEBUG" || got["reason"] != want.reason || got["setting"] != want.setting || got["previous_response_id"] == "" {
			t.Errorf("%s: logged %v, want reason %q setting %q at DEBUG", name, got, want.reason, want.setting)
		}
	}
	cold0 := s.Counters().Cold.Load()
	metric0 := map[string]float64{}
	reasons := []string{"settings_differ", "not_latest", "not_suspended", "not_on_connection", "other_lane", "warmup", "input"}
	for _, r := range reasons {
		metric0[r] = servertest.Metric(t, base, `tether_cold_continuations_total{reason="`+r+`"}`)
	}

	c := f.dial(t)
	r1 := turn(t, c, create("Check the disk usage.", tools))
	// metadata not sent again: the settings differ.
	noMeta := with(respID(r1), nil)
	delete(noMeta, "metadata")
	check("metadata dropped", turn(t, c, create([]any{toolOutput(callIDs(r1)[0], "42%")}, noMeta)), result{"settings_differ", "metadata"})

	c = f.dial(t)
	r2 := turn(t, c, create("Check the disk usage.", tools))
	check("instructions added", turn(t, c, create([]any{toolOutput(callIDs(r2)[0], "42%")}, with(respID(r2), map[string]any{"instructions": "Be brief."}))),
		result{"settings_differ", "instructions"})

	// A hot continuation, then a fork from the segment before it.
	c = f.dial(t)
	r3 := turn(t, c, create("Check the disk usage.", tools))
	hot0 := s.Counters().Hot.Load()
	turn(t, c, create([]any{toolOutput(callIDs(r3)[0], "42%")}, with(respID(r3), nil)))
	if s.Counters().Hot.Load()-hot0 != 1 {
		t.Fatalf("the same settings did not take the hot path")
	}
	check("fork from an older response", turn(t, c, create([]any{toolOutput(callIDs(r3)[0], "43%")}, with(respID(r3), nil))), result{"not_latest", ""})

	// The input sends the message before the tool output.
	c = f.dial(t)
	r4 := turn(t, c, create("Check the disk usage.", tools))
	check("message first", turn(t, c, create([]any{userMsg("and?"), toolOutput(callIDs(r4)[0], "42%")}, with(respID(r4), nil))), result{"input", ""})

	// Another lane.
	c = f.dial(t)
	r5 := turn(t, c, create("Check the disk usage.", tools))
	check("other lane", turn(t, c, create([]any{toolOutput(callIDs(r5)[0], "42%")}, with(respID(r5), map[string]any{"stream_id": "B"}))), result{"other_lane", ""})

	// A warm-up continuation.
	c = f.dial(t)
	r6 := turn(t, c, create("Check the disk usage.", tools))
	check("warm-up", turn(t, c, create([]any{toolOutput(callIDs(r6)[0], "42%")}, with(respID(r6), map[string]any{"generate": false}))), result{"warmup", ""})

	// A rollout released for room (-max-suspended 3, answered chains are released first).
	c = f.dial(t)
	a := turn(t, c, create("first chain", map[string]any{"store": false}))
	for range 3 {
		turn(t, c, create("another chain", map[string]any{"store": false}))
	}
	check("released rollout", turn(t, c, create("and?", map[string]any{"store": false, "previous_response_id": respID(a)})), result{"not_suspended", ""})

	// A stored response continued from another connection.
	c = f.dial(t)
	st := turn(t, c, create("Remember: teal", map[string]any{"store": true}))
	c2 := f.dial(t)
	check("other connection", turn(t, c2, create("colour?", map[string]any{"store": true, "previous_response_id": respID(st)})), result{"not_on_connection", ""})

	if got := s.Counters().Cold.Load() - cold0; got != 8 {
		t.Errorf("cold continuations: %d, want 8", got)
	}
	want := map[string]float64{"settings_differ": 2, "not_latest": 1, "not_suspended": 1, "not_on_connection": 1, "other_lane": 1, "warmup": 1, "input": 1}
	for _, r := range reasons {
		if got := servertest.Metric(t, base, `tether_cold_continuations_total{reason="`+r+`"}`) - metric0[r]; got != want[r] {
			t.Errorf("tether_cold_continuations_total{reason=%q} rose by %v, want %v", r, got, want[r])
		}
	}
}
