package soak

import (
	"strings"
	"testing"
)

// TestDensity holds 150 rollouts live, then parked, over real sockets: parked rollouts hold
// no goroutine (the count stays that of the open connections, give or take the previous
// tier's last ones ending), and every figure is measured.
func TestDensity(t *testing.T) {
	var phases []string
	rep, err := Density(t.Context(), DensityConfig{Rollouts: 150, Resumes: 20,
		Progress: func(msg string) { phases = append(phases, msg) }})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rollouts != 150 || rep.Connections != 3 || rep.ContextTokens == 0 {
		t.Fatalf("report %+v", rep)
	}
	if rep.Live.GoroutinesHeld < rep.Live.GoroutinesBefore+150 {
		t.Fatalf("live: %d goroutines held, %d before: want one per rollout", rep.Live.GoroutinesHeld, rep.Live.GoroutinesBefore)
	}
	if rep.Parked.GoroutinesHeld > rep.Parked.GoroutinesBefore+5 {
		t.Fatalf("parked: %d goroutines held, %d before: want none per rollout", rep.Parked.GoroutinesHeld, rep.Parked.GoroutinesBefore)
	}
	for _, tier := range []DensityTier{rep.Live, rep.Parked} {
		if tier.Resumes != 20 || tier.ResumeP50 <= 0 || tier.ResumeP99 < tier.ResumeP50 {
			t.Fatalf("tier %+v", tier)
		}
	}
	if rep.Parked.BytesPerRollout >= rep.Live.BytesPerRollout {
		t.Fatalf("parked %d B per rollout, live %d", rep.Parked.BytesPerRollout, rep.Live.BytesPerRollout)
	}
	var b strings.Builder
	rep.WriteText(&b)
	if !strings.Contains(b.String(), "parked") || len(phases) != 6 {
		t.Fatalf("text %q, phases %q", b.String(), phases)
	}
}
