package chat_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tetherd/tether/internal/llamatest"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler/chat"
)

// kvRun is the outcome of a hotTurns run: per hot turn, whether the engine reused at least 90%
// of the previous turn's context.
type kvRun struct {
	hot, kept     int // hot turns; those whose cached tokens cover >= 90% of the previous turn's prompt and output
	survived      int // hot turns whose cached tokens cover >= 90% of the previous turn's prompt (its KV survived)
	failed        []string
	coldPrefill   time.Duration // mean wall time of a first turn (the whole context prefilled)
	hotTurn       time.Duration // mean wall time of a hot turn
	first, others int
}

func (r kvRun) fraction() float64 {
	if r.hot == 0 {
		return 0
	}
	return float64(r.kept) / float64(r.hot)
}

func (r kvRun) survivedFraction() float64 {
	if r.hot == 0 {
		return 0
	}
	return float64(r.survived) / float64(r.hot)
}

func (r kvRun) String() string {
	return fmt.Sprintf("%d hot turns: %.2f cached >= 90%% of the previous prompt, %.2f >= 90%% of the previous prompt+output; first turn %v, hot turn %v",
		r.hot, r.survivedFraction(), r.fraction(), r.coldPrefill.Round(time.Millisecond), r.hotTurn.Round(time.Millisecond))
}

// hotTurns runs rollouts concurrent public-shape WebSocket conversations of turns+1 turns each
// against front: each turn after the first continues the previous Response hot
// (previous_response_id on the same connection, the same settings) with a new user message.
// The engine's default sampling settings apply (llamatest seeds them): at temperature 0 this
// model rarely ends an answer by itself. A turn cut off at max_output_tokens ends its chain and
// the next turn starts a new one (a first turn, not counted as hot).
func hotTurns(t *testing.T, front string, rollouts, turns int) kvRun {
	var mu sync.Mutex
	var run kvRun
	var coldSum, hotSum time.Duration
	var wg sync.WaitGroup
	for r := range rollouts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := wstest.Dial(t, "ws"+strings.TrimPrefix(front, "http")+"/v1/responses", nil)
			prev, prevPrompt, prevContext := "", 0, 0
			for turn := range turns + 1 {
				create := map[string]any{"type": "response.create", "model": llamatest.Model, "store": false,
					"input": fmt.Sprintf("weather %d of rollout %d", turn, r), "max_output_tokens": 600}
				if prev != "" {
					create["previous_response_id"] = prev
				}
				start := time.Now()
				c.Send(create)
				fs := c.Until("response.completed", "response.incomplete", "response.failed")
				took := time.Since(start)
				last := fs[len(fs)-1]
				mu.Lock()
				if last.Type() == "response.failed" {
					run.failed = append(run.failed, fmt.Sprintf("rollout %d turn %d: %v", r, turn, last.Get("response", "error")))
					mu.Unlock()
					return
				}
				in := last.Num("response", "usage", "input_tokens")
				cached := last.Num("response", "usage", "input_tokens_details", "cached_tokens")
				out := last.Num("response", "usage", "output_tokens")
				if prev == "" {
					coldSum += took
					run.first++
				} else {
					hotSum += took
					run.others++
					run.hot++
					if float64(cached) >= 0.9*float64(prevContext) {
						run.kept++
					}
					if float64(cached) >= 0.9*float64(prevPrompt) {
						run.survived++
					}
				}
				mu.Unlock()
				prev, prevPrompt, prevContext = last.Str("response", "id"), in, in+out
				if last.Type() != "response.completed" { // cut off: the chain ends, a new one starts
					prev = ""
				}
			}
		}()
	}
	wg.Wait()
	if run.first > 0 {
		run.coldPrefill = coldSum / time.Duration(run.first)
	}
	if run.others > 0 {
		run.hotTurn = hotSum / time.Duration(run.others)
	}
	return run
}

// TestEngineKVKept runs 16 concurrent conversations of 8 hot turns over 4 slots of a real
// llama-server without its host-RAM prompt cache. With Tether owning the slots and saving a
// suspended rollout's KV when its slot is handed on, at least 95% of hot turns find the
// previous turn's prompt cached. (Of the previous turn's output, the engine reuses only what
// re-tokenizes to the tokens it sampled: the strict fraction is logged.) TETHER_MEASURE=1 also
// runs, for comparison, owned slots without saving and the engine's own slot choice.
func TestEngineKVKept(t *testing.T) {
	if testing.Short() {
		t.Skip("engine measurement: skipped with -short")
	}
	const rollouts, turns, slots = 16, 8, 4
	modes := []struct {
		name  string
		slots int
		save  bool
	}{{"owned+saved", slots, true}}
	if envMeasure() {
		modes = append(modes, struct {
			name  string
			slots int
			save  bool
		}{"owned, no save", slots, false}, struct {
			name  string
			slots int
			save  bool
		}{"engine's choice", 0, false})
	}
	for i, mode := range modes {
		eng := llamatest.Start(t, llamatest.Options{Slots: slots, SlotContext: 4096, NoCacheRAM: true, SlotSave: true})
		opts := chat.Options{Slots: mode.slots}
		if mode.save {
			opts.SlotDir = eng.SlotDir()
		}
		front, m, px := engineFront(t, opts, eng)
		run := hotTurns(t, front, rollouts, turns)
		t.Logf("%s: %s; engine prefill per step %s; %s", mode.name, run, prefillTime(px[0].waitSteps(t, rollouts*(turns+1))), kvCounts(t, m))
		if len(run.failed) > 0 {
			t.Fatalf("%s: %d turns failed: %v", mode.name, len(run.failed), run.failed)
		}
		if i == 0 && run.survivedFraction() < 0.95 {
			t.Errorf("%s: %s, want >= 0.95 of hot turns with the previous prompt cached", mode.name, run)
		}
		eng.Stop()
	}
}

// kvCounts reads the model's KV save/restore/drop counters and their times off its metrics.
func kvCounts(t *testing.T, m *chat.Model) string {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "tether_upstream_kv") {
			continue
		}
		for _, mm := range mf.GetMetric() {
			op := ""
			for _, l := range mm.GetLabel() {
				if l.GetName() == "op" {
					op = l.GetValue()
				}
			}
			parts = append(parts, fmt.Sprintf("%s %s %g", strings.TrimPrefix(mf.GetName(), "tether_upstream_"), op, mm.GetCounter().GetValue()))
		}
	}
	return strings.Join(parts, ", ")
}

// envMeasure reports whether TETHER_MEASURE=1 asks for the comparison runs.
func envMeasure() bool { return os.Getenv("TETHER_MEASURE") == "1" }

// modelCounter sums the model's metric name over its labels.
func modelCounter(t *testing.T, m *chat.Model, name string) float64 {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, mm := range mf.GetMetric() {
				sum += mm.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// prefillTime is the mean time the engine spent prefilling per step, and the tokens it prefilled.
func prefillTime(steps []engineStep) string {
	var ms float64
	var tokens int
	for _, st := range steps {
		ms += st.promptMS
		tokens += st.prompt - st.cacheN
	}
	n := float64(max(len(steps), 1))
	return fmt.Sprintf("%.1f ms for %.0f tokens", ms/n, float64(tokens)/n)
}
