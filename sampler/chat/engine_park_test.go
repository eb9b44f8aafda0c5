package chat_test

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tetherd/tether/internal/llamatest"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/sampler/chat"
	"github.com/tetherd/tether/session"
)

// parkSettings are the settings of the engine park tests: temperature 0, so that two sessions
// given one prompt write one text.
func parkSettings() *sampler.Settings {
	zero := 0.0
	return &sampler.Settings{Model: llamatest.Model, Temperature: &zero, MaxOutputTokens: 40}
}

// turn2 is the second step of a session whose first step took first and wrote text.
func turn2(first []protocol.Item, text string) *sampler.Step {
	out, in := assistantItem(text), userItem("and what of the second dream?")
	return &sampler.Step{Index: 1, Output: []protocol.Item{out}, Input: []protocol.Item{in},
		Context: append(append([]protocol.Item(nil), first...), out, in)}
}

// TestEnginePark parks a session on a real llama-server (one slot, no host-RAM prompt cache):
// its slot's KV is saved to a file and the slot freed. Another Tether instance on the same
// engine and slot directory then runs another rollout on that one slot (the parked KV is gone
// from the engine) and unparks the session: its next step finds the whole first step's prompt
// cached (the file was restored) and the file is removed; the step sends what a session that
// stayed open sends and writes the same text.
func TestEnginePark(t *testing.T) {
	eng := llamatest.Start(t, llamatest.Options{Slots: 1, NoCacheRAM: true, SlotSave: true})
	px, u := newEngineProxy(t, eng.URL())
	opts := chat.Options{BaseURLs: []string{u + "/v1"}, Slots: 1, SlotDir: eng.SlotDir()}
	first := []protocol.Item{userItem("weather 0 of the parked rollout")}
	info := sampler.RolloutInfo{ID: "resp_parked", Settings: parkSettings()}

	a := newModel(t, opts)
	s, err := a.Open(t.Context(), info)
	if err != nil {
		t.Fatal(err)
	}
	res0, text0 := sample(t, s, &sampler.Step{Input: first, Context: first})
	state := park(t, s)
	file := kvFile(t, state)
	if file == "" || !exists(filepath.Join(eng.SlotDir(), file)) || a.Pinned() != 0 {
		t.Fatalf("after the park: state %s, %d slots held, files %v", state, a.Pinned(), dirFiles(t, eng.SlotDir()))
	}

	b := newModel(t, opts) // another instance
	other, err := b.Open(t.Context(), sampler.RolloutInfo{ID: "resp_other", Settings: parkSettings()})
	if err != nil {
		t.Fatal(err)
	}
	otherIn := []protocol.Item{userItem("a different rollout entirely")}
	sample(t, other, &sampler.Step{Input: otherIn, Context: otherIn}) // the one slot now holds its KV
	ps := unparkSession(t, b, info, state, first)
	res1, text1 := sample(t, ps, turn2(first, text0))
	if res1.CachedTokens < res0.InputTokens {
		t.Fatalf("unparked step: %d of %d prompt tokens cached, want the first step's %d (the KV restored)", res1.CachedTokens, res1.InputTokens, res0.InputTokens)
	}
	if exists(filepath.Join(eng.SlotDir(), file)) {
		t.Fatal("the restored file is still there")
	}
	live, err := b.Open(t.Context(), sampler.RolloutInfo{ID: "resp_live", Settings: parkSettings()})
	if err != nil {
		t.Fatal(err)
	}
	_, liveText0 := sample(t, live, &sampler.Step{Input: first, Context: first})
	_, liveText1 := sample(t, live, turn2(first, liveText0))
	steps := px.waitSteps(t, 5)
	if text0 != liveText0 || text1 != liveText1 || strings.Join(steps[2].describe(), "\n") != strings.Join(steps[4].describe(), "\n") {
		t.Fatalf("unparked: %q then %q, stayed open: %q then %q", text0, text1, liveText0, liveText1)
	}
	other.Close()
	ps.Close()
	live.Close()
	if n := kvOp(t, b, "restore"); n < 1 {
		t.Errorf("%v restores, want the unparked session's", n)
	}
	if files := dirFiles(t, eng.SlotDir()); len(files) != 0 || b.Pinned() != 0 {
		t.Fatalf("after both ended: files %v, %d slots held", files, b.Pinned())
	}
}

// TestEngineParkPrefills: an unparked session whose KV cannot be restored — it goes to another
// replica, its file was removed, or the bound on saved bytes dropped the file while it was
// parked — prefills its next step (cached_tokens say so) and does not fail.
func TestEngineParkPrefills(t *testing.T) {
	engines := replicas(t, 2)
	dir := engines[0].SlotDir()
	first := []protocol.Item{userItem("weather 0 of the parked rollout")}
	info := sampler.RolloutInfo{ID: "resp_parked", Settings: parkSettings()}
	opts := func(e *llamatest.Server, bound int64) chat.Options {
		return chat.Options{BaseURLs: []string{e.V1()}, Slots: 4, SlotDir: dir, SlotSaveBytes: bound, Logger: servertest.Logger(t, slog.LevelWarn)}
	}
	// parkOne runs the first step on m and parks the session.
	parkOne := func(t *testing.T, m *chat.Model) (sampler.StepResult, string, []byte) {
		s, err := m.Open(t.Context(), info)
		if err != nil {
			t.Fatal(err)
		}
		res0, text0 := sample(t, s, &sampler.Step{Input: first, Context: first})
		state := park(t, s)
		if kvFile(t, state) == "" {
			t.Fatalf("state %s names no file", state)
		}
		return res0, text0, state
	}
	// prefilled unparks state on m and checks that its next step was prefilled.
	prefilled := func(t *testing.T, m *chat.Model, res0 sampler.StepResult, text0 string, state []byte) {
		s := unparkSession(t, m, info, state, first)
		res1, _ := sample(t, s, turn2(first, text0))
		if res1.CachedTokens >= res0.InputTokens {
			t.Errorf("unparked step: %d of %d prompt tokens cached, want a prefill", res1.CachedTokens, res1.InputTokens)
		}
		s.Close()
	}
	noFiles := func(t *testing.T) {
		if files := dirFiles(t, dir); len(files) != 0 {
			t.Errorf("files left after every rollout ended: %v", files)
		}
	}
	// fill runs a step of another rollout on every slot of m's replica, so that none holds
	// the parked session's KV; it returns the sessions (suspended, holding their slots).
	fill := func(t *testing.T, m *chat.Model) []sampler.ModelSession {
		var ss []sampler.ModelSession
		for i := range 4 {
			s, err := m.Open(t.Context(), sampler.RolloutInfo{ID: "resp_other" + string(rune('a'+i)), Settings: parkSettings()})
			if err != nil {
				t.Fatal(err)
			}
			in := []protocol.Item{userItem("a different rollout entirely, number " + string(rune('a'+i)))}
			sample(t, s, &sampler.Step{Input: in, Context: in})
			ss = append(ss, s)
		}
		return ss
	}
	closeAll := func(ss []sampler.ModelSession) {
		for _, s := range ss {
			s.Close()
		}
	}

	t.Run("another replica", func(t *testing.T) {
		res0, text0, state := parkOne(t, newModel(t, opts(engines[0], 0)))
		prefilled(t, newModel(t, opts(engines[1], 0)), res0, text0, state)
		noFiles(t)
	})
	t.Run("file removed", func(t *testing.T) {
		m := newModel(t, opts(engines[0], 0))
		res0, text0, state := parkOne(t, m)
		if err := os.Remove(filepath.Join(dir, kvFile(t, state))); err != nil {
			t.Fatal(err)
		}
		others := fill(t, m)
		prefilled(t, m, res0, text0, state)
		closeAll(others)
		noFiles(t)
	})
	t.Run("dropped by the bound", func(t *testing.T) {
		m := newModel(t, opts(engines[0], 1)) // every new file drops the older ones
		res0, text0, state := parkOne(t, m)
		others := fill(t, m)
		// One more rollout takes the slot of another, whose KV is saved first: that file
		// drops the parked one.
		extra, err := m.Open(t.Context(), sampler.RolloutInfo{ID: "resp_extra", Settings: parkSettings()})
		if err != nil {
			t.Fatal(err)
		}
		sample(t, extra, &sampler.Step{Input: first[:1], Context: first[:1]})
		if file := filepath.Join(dir, kvFile(t, state)); exists(file) {
			t.Fatalf("the parked file is still there (%s)", kvCounts(t, m))
		}
		prefilled(t, m, res0, text0, state)
		closeAll(append(others, extra))
		noFiles(t)
		if n := kvOp(t, m, "drop"); n < 1 {
			t.Errorf("%v KV drops counted, want the parked file's", n)
		}
	})
}

// TestEngineParkThroughServer runs the engine's tool rollout on the append shape through a
// server that parks rollouts suspended a moment (-park-after): the suspended rollout parks
// (the gauge says so), holding no slot and leaving its KV in a file; the append resumes it hot:
// the engine's cache_n covers the previous step's prompt, from the restored file.
func TestEngineParkThroughServer(t *testing.T) {
	eng := llamatest.Start(t, llamatest.Options{Slots: 2, Seed: llamatest.ToolSeed, NoCacheRAM: true, SlotSave: true})
	px, u := newEngineProxy(t, eng.URL())
	m := newModel(t, chat.Options{BaseURLs: []string{u + "/v1"}, Slots: 2, SlotDir: eng.SlotDir()})
	if err := m.Probe(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, front := servertest.Start(t, server.Options{Model: m, Limits: session.Limits{ParkAfter: 20 * time.Millisecond}})
	c := dialAppend(t, front)
	c.Send(toolCreate())
	fs := c.Until("response.done", "response.completed", "response.incomplete", "response.failed")
	done := fs[len(fs)-1]
	calls := callsOf(fs)
	if done.Type() != "response.done" || len(calls) == 0 {
		t.Skipf("the model did not call the tool (%s)", done.Type())
	}
	eventually(t, "the rollout parked", func() bool {
		return servertest.Metric(t, front, `tether_rollouts{state="parked"}`) == 1
	})
	if files := dirFiles(t, eng.SlotDir()); len(files) != 1 || m.Pinned() != 0 {
		t.Fatalf("parked: files %v, %d slots held", files, m.Pinned())
	}
	c.Send(map[string]any{"type": "response.append", "response_id": done.Str("response_id"), "input": outputs(calls)})
	fs = c.Until("response.done", "response.completed", "response.incomplete", "response.failed")
	if last := fs[len(fs)-1]; last.Type() == "response.failed" {
		t.Fatalf("the resumed step failed: %v", last.Get("response", "error"))
	}
	steps := px.waitSteps(t, 2)
	if steps[1].cacheN < steps[0].prompt || kvOp(t, m, "restore") != 1 || kvOp(t, m, "park") != 1 {
		t.Fatalf("resumed step: cache_n %d of the first step's %d prompt tokens; %s", steps[1].cacheN, steps[0].prompt, kvCounts(t, m))
	}
	if servertest.Metric(t, front, "tether_unparks_total") != 1 {
		t.Fatal("no unpark counted")
	}
}

// TestEngineParkedRolloutEnds ends parked tool rollouts on a real llama-server without
// resuming them, by response.cancel and by closing the connection: each ends, and its slot
// file goes with it (none is left in the slot directory for the sweep) and no slot is held.
func TestEngineParkedRolloutEnds(t *testing.T) {
	eng := llamatest.Start(t, llamatest.Options{Slots: 2, Seed: llamatest.ToolSeed, NoCacheRAM: true, SlotSave: true})
	m := newModel(t, chat.Options{BaseURLs: []string{eng.URL() + "/v1"}, Slots: 2, SlotDir: eng.SlotDir()})
	if err := m.Probe(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, front := servertest.Start(t, server.Options{Model: m, Limits: session.Limits{ParkAfter: 20 * time.Millisecond}})
	// parked starts the tool rollout on c and waits until it is parked with its KV in a file.
	parked := func(t *testing.T, c *wstest.Client) string {
		t.Helper()
		c.Send(toolCreate())
		fs := c.Until("response.done", "response.completed", "response.incomplete", "response.failed")
		done := fs[len(fs)-1]
		if done.Type() != "response.done" {
			t.Skipf("the model did not call the tool (%s)", done.Type())
		}
		eventually(t, "the rollout parked with its KV in a file", func() bool {
			return servertest.Metric(t, front, `tether_rollouts{state="parked"}`) == 1 && len(dirFiles(t, eng.SlotDir())) == 1
		})
		return done.Str("response_id")
	}
	for _, end := range []string{"cancel", "close"} {
		t.Run(end, func(t *testing.T) {
			c := dialAppend(t, front)
			id := parked(t, c)
			if end == "cancel" {
				c.Send(map[string]any{"type": "response.cancel", "response_id": id})
				if last := c.Until("response.incomplete", "response.failed"); last[len(last)-1].Type() != "response.incomplete" {
					t.Fatalf("cancelled: %v", last[len(last)-1])
				}
			} else {
				c.C.CloseNow()
			}
			eventually(t, "the rollout ended", func() bool {
				return servertest.Metric(t, front, `tether_rollouts{state="parked"}`) == 0 && servertest.Metric(t, front, `tether_rollouts{state="suspended"}`) == 0
			})
			eventually(t, "its slot file removed", func() bool { return len(dirFiles(t, eng.SlotDir())) == 0 })
			if m.Pinned() != 0 {
				t.Fatalf("%d slots held", m.Pinned())
			}
		})
	}
}

// describe returns the messages a recorded step sent, one line each.
func (st engineStep) describe() []string {
	var out []string
	for _, m := range st.request.Messages {
		out = append(out, string(m))
	}
	return out
}

// kvOp reads the model's tether_upstream_kv_total of op, summed over its replicas.
func kvOp(t *testing.T, m *chat.Model, op string) float64 {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "tether_upstream_kv_total" {
			continue
		}
		for _, mm := range mf.GetMetric() {
			for _, l := range mm.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == op {
					sum += mm.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// TestEngineStalledSaveOrphan: a park whose slot save gets no answer from a stalled
// llama-server (kill -STOP) gives up after Options.Timeout without a file; the engine writes
// the file anyway when it runs again (kill -CONT). That file is removed as soon as the engine
// answers Tether's next request, not left until the sweep.
func TestEngineStalledSaveOrphan(t *testing.T) {
	eng := llamatest.Start(t, llamatest.Options{Slots: 1, SlotSave: true})
	m := newModel(t, chat.Options{BaseURLs: []string{eng.V1()}, Slots: 1, SlotDir: eng.SlotDir(), Timeout: time.Second})
	s, err := m.Open(t.Context(), sampler.RolloutInfo{ID: "resp_stalled", Settings: parkSettings()})
	if err != nil {
		t.Fatal(err)
	}
	first := []protocol.Item{userItem("weather 0 of the stalled rollout")}
	sample(t, s, &sampler.Step{Input: first, Context: first})

	eng.Signal(syscall.SIGSTOP)
	stopped := true
	t.Cleanup(func() {
		if stopped {
			eng.Signal(syscall.SIGCONT)
		}
	})
	if state := park(t, s); kvFile(t, state) != "" {
		t.Fatalf("a save the engine did not answer named a file: %s", state)
	}
	if files := dirFiles(t, eng.SlotDir()); len(files) != 0 {
		t.Fatalf("files after the failed save: %v", files)
	}
	eng.Signal(syscall.SIGCONT)
	stopped = false
	deadline := time.Now().Add(10 * time.Second)
	for len(dirFiles(t, eng.SlotDir())) == 0 { // the engine runs the save it had read
		if time.Now().After(deadline) {
			t.Skip("the resumed engine did not write the abandoned save's file: nothing to remove")
		}
		time.Sleep(5 * time.Millisecond)
	}

	other, err := m.Open(t.Context(), sampler.RolloutInfo{ID: "resp_next", Settings: parkSettings()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	in := []protocol.Item{userItem("another rollout")}
	sample(t, other, &sampler.Step{Input: in, Context: in})
	if files := dirFiles(t, eng.SlotDir()); len(files) != 0 {
		t.Fatalf("after the engine answered again, the abandoned save's file is still there: %v", files)
	}
}

// TestEngineSlotDirElsewhere: with an -upstream-slot-dir that is not the engine's
// --slot-save-path, the first save finds no file where Tether looks: the park names no file,
// a warning says which directory is wrong, and no later save is sent, so the engine's
// directory holds that one file instead of one more per park that Tether can never remove.
func TestEngineSlotDirElsewhere(t *testing.T) {
	eng := llamatest.Start(t, llamatest.Options{Slots: 2, SlotSave: true})
	var logs strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m := newModel(t, chat.Options{BaseURLs: []string{eng.V1()}, Slots: 2, SlotDir: t.TempDir(), Logger: log})
	for i := range 2 {
		s, err := m.Open(t.Context(), sampler.RolloutInfo{ID: fmt.Sprintf("resp_elsewhere%d", i), Settings: parkSettings()})
		if err != nil {
			t.Fatal(err)
		}
		first := []protocol.Item{userItem("weather 0 of the parked rollout")}
		sample(t, s, &sampler.Step{Input: first, Context: first})
		if f := kvFile(t, park(t, s)); f != "" {
			t.Fatalf("park %d named %s, a file Tether cannot see", i, f)
		}
		s.Close()
	}
	if files := dirFiles(t, eng.SlotDir()); len(files) != 1 {
		t.Fatalf("the engine's directory holds %v: want the first save's file only", files)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "is not the engine's --slot-save-path") {
		t.Fatalf("no warning naming the directory: %s", logs.String())
	}
	if n := kvOp(t, m, "save"); n != 0 {
		t.Fatalf("%v saves counted, want 0", n)
	}
}

// lockedWriter serializes writes to w with mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
