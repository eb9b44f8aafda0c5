package chat_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tetherd/tether/internal/llamatest"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/sampler/chat"
)

// writeFile writes a file of dir aged age (its modification time that far in the past).
func writeFile(t *testing.T, dir, name string, age time.Duration) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("kv"), 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-age)
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
}

// names lists every entry of dir, sorted.
func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// swept reads the model's tether_upstream_slot_files_swept_total (-1 when it is not exported).
func swept(t *testing.T, m *chat.Model) float64 {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "tether_upstream_slot_files_swept_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}

// A Model with a slot directory and a TTL removes, when it starts, the slot files of Tether's
// naming older than the TTL (left by an instance that exited), and nothing else: not younger
// files, not other files, not directories.
func TestStaleSlotFilesSwept(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "tether-resp_gone-0123456789abcdef.bin", 2*time.Hour)
	writeFile(t, dir, "tether-resp_waiting-0123456789abcdef.bin", 30*time.Minute)
	writeFile(t, dir, "tether-resp_short-0123.bin", 2*time.Hour)
	writeFile(t, dir, "other-engine-slot.bin", 2*time.Hour)
	if err := os.Mkdir(filepath.Join(dir, "tether-resp_dir-0123456789abcdef.bin"), 0o700); err != nil {
		t.Fatal(err)
	}
	opts := chat.Options{BaseURLs: []string{"http://127.0.0.1:1/v1"}, Slots: 1, SlotDir: dir, SlotFileTTL: time.Hour}
	m := newModel(t, opts)
	want := []string{"other-engine-slot.bin", "tether-resp_dir-0123456789abcdef.bin",
		"tether-resp_short-0123.bin", "tether-resp_waiting-0123456789abcdef.bin"}
	if got := names(t, dir); !slices.Equal(got, want) {
		t.Fatalf("after start: %v, want %v", got, want)
	}
	if n := swept(t, m); n != 1 {
		t.Fatalf("swept counter %v, want 1", n)
	}
	opts.SlotFileTTL = 0
	writeFile(t, dir, "tether-resp_gone-0123456789abcdef.bin", 2*time.Hour)
	if m := newModel(t, opts); swept(t, m) != -1 || !exists(filepath.Join(dir, "tether-resp_gone-0123456789abcdef.bin")) {
		t.Fatal("a Model without a TTL swept")
	}
}

// With a TTL so short that every file is stale at once and every save sweeps, the files the
// Model's own pools hold are still never removed: a parked session's file survives the sweeps
// of later saves and is restored when it is unparked, while an orphan is removed by the first
// save's sweep.
func TestSweepKeepsLiveFiles(t *testing.T) {
	eng := llamatest.Start(t, llamatest.Options{Slots: 1, NoCacheRAM: true, SlotSave: true})
	opts := chat.Options{BaseURLs: []string{eng.V1()}, Slots: 1, SlotDir: eng.SlotDir(), SlotFileTTL: time.Nanosecond}
	m := newModel(t, opts)
	info := sampler.RolloutInfo{ID: "resp_parked", Settings: parkSettings()}
	first := []protocol.Item{userItem("weather 0 of the parked rollout")}
	s, err := m.Open(t.Context(), info)
	if err != nil {
		t.Fatal(err)
	}
	res0, text0 := sample(t, s, &sampler.Step{Input: first, Context: first})
	writeFile(t, eng.SlotDir(), "tether-resp_orphan-0123456789abcdef.bin", time.Minute)
	state := park(t, s) // saves: the sweep before it removes the orphan
	file := kvFile(t, state)
	if got := names(t, eng.SlotDir()); !slices.Equal(got, []string{file}) {
		t.Fatalf("after the park: files %v, want only %s", got, file)
	}
	// Two more rollouts on the one slot: the second takes the first's slot, saving its KV
	// (a sweep runs before that save, with the parked file long past the TTL).
	var others []sampler.ModelSession
	for i, id := range []string{"resp_a", "resp_b"} {
		o, err := m.Open(t.Context(), sampler.RolloutInfo{ID: id, Settings: parkSettings()})
		if err != nil {
			t.Fatal(err)
		}
		in := []protocol.Item{userItem("a different rollout " + string(rune('a'+i)))}
		sample(t, o, &sampler.Step{Input: in, Context: in})
		others = append(others, o)
	}
	if n := kvOp(t, m, "save"); n < 2 {
		t.Fatalf("%v saves, want the park's and the handed-on slot's", n)
	}
	if !exists(filepath.Join(eng.SlotDir(), file)) {
		t.Fatalf("the parked file was swept: files %v", names(t, eng.SlotDir()))
	}
	ps := unparkSession(t, m, info, state, first)
	res1, _ := sample(t, ps, turn2(first, text0))
	if res1.CachedTokens < res0.InputTokens {
		t.Fatalf("unparked step: %d of %d prompt tokens cached, want the first step's %d", res1.CachedTokens, res1.InputTokens, res0.InputTokens)
	}
	if n := swept(t, m); n != 1 {
		t.Fatalf("swept counter %v, want 1 (the orphan)", n)
	}
	ps.Close()
	for _, o := range others {
		o.Close()
	}
}
