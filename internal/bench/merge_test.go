package bench

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/tetherd/tether/internal/server"
)

// TestOnTurnAndMerge runs two transports as two concurrent runs, as tether serve -ui does,
// checks that OnTurn saw every turn sample that the reports hold, and merges the reports.
func TestOnTurnAndMerge(t *testing.T) {
	url := inProcess(t, server.Options{})
	var (
		mu   sync.Mutex
		seen = map[string][]TurnSample{}
		wg   sync.WaitGroup
		reps = make([]*Report, 2)
		errs = make([]error, 2)
	)
	for i, name := range []string{Append, HTTP} { // out of report order on purpose
		cfg := tiny(url)
		cfg.StreamTokens, cfg.Concurrent = -1, -1
		cfg.Transports = []string{name}
		cfg.OnTurn = func(tr string, s TurnSample) {
			mu.Lock()
			seen[tr] = append(seen[tr], s)
			mu.Unlock()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			reps[i], errs[i] = Run(context.Background(), cfg)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Merge(reps...)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Transports) != 2 || rep.Transports[0].Name != HTTP || rep.Transports[1].Name != Append {
		t.Fatalf("merged transports %+v", rep.Transports)
	}
	for _, tr := range rep.Transports {
		var measured []TurnSample
		warm := 0
		for _, s := range seen[tr.Name] {
			if s.Rollout == 0 {
				warm++
				continue
			}
			measured = append(measured, s)
		}
		if warm != 2 { // WarmupCalls 1: two turns
			t.Errorf("%s: %d warm-up turns seen, want 2", tr.Name, warm)
		}
		if len(measured) != len(tr.PerTurn) {
			t.Fatalf("%s: OnTurn saw %d measured turns, the report holds %d", tr.Name, len(measured), len(tr.PerTurn))
		}
		for i := range measured {
			if measured[i] != tr.PerTurn[i] {
				t.Errorf("%s turn %d: OnTurn %+v, report %+v", tr.Name, i+1, measured[i], tr.PerTurn[i])
			}
		}
	}
	if a := rep.Transports[1]; a.OverheadRatio != a.OverheadMS.P50/rep.Transports[0].OverheadMS.P50 {
		t.Errorf("append ×http %v not recomputed", a.OverheadRatio)
	}
	if rep.Workload.HistoryTokensEnd == 0 {
		t.Error("history_tokens_end not recomputed")
	}
	if !strings.Contains(rep.SVG(), "<polyline") {
		t.Error("SVG has no line")
	}
	if _, err := Merge(reps[0], reps[0]); err == nil {
		t.Error("a transport in two runs merged")
	}
	other := *reps[1]
	other.Workload.Calls++
	if _, err := Merge(reps[0], &other); err == nil {
		t.Error("runs of two workloads merged")
	}
	if _, err := Merge(reps[0], nil); err == nil {
		t.Error("a nil report merged")
	}
	if _, err := Merge(); err == nil {
		t.Error("no report merged")
	}
}
