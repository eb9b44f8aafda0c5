package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"
)

// TestSoak is the CI soak: 20 seconds against an in-process server, with every kind of
// disruption, then 0 items lost or duplicated, no violation, and goroutines and RSS back within
// 10% of the start. go test -short skips it; TETHER_SOAK_DURATION, _CONNECTIONS and _TURNS
// override its size (e.g. TETHER_SOAK_DURATION=2m).
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak takes about a minute; -short skips it")
	}
	cfg := Config{
		Connections: envInt(t, "TETHER_SOAK_CONNECTIONS", 40),
		Turns:       envInt(t, "TETHER_SOAK_TURNS", 5),
		Duration:    20 * time.Second,
		Seed:        time.Now().UnixNano(),
		Suspended:   500,
		Rates:       Rates{Disconnect: 0.05, Cancel: 0.05, BadFrame: 0.05, BadAppend: 0.03, Slow: 0.04, Stall: 0.01},
		BigAnswer:   20000,
		Warmup:      10 * time.Second,
		// Under -race the client drains a backlog slowly; a longer ping interval keeps the
		// server from taking a busy reader for a dead one (the serve default is 30s).
		PingInterval: 10 * time.Second,
		WriteTimeout: 3 * time.Second,
	}
	if v := os.Getenv("TETHER_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("TETHER_SOAK_DURATION: %v", err)
		}
		cfg.Duration = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	rep.WriteText(&buf)
	t.Logf("seed %d\n%s", cfg.Seed, buf.String())

	if rep.Verified == 0 {
		t.Error("no rollout was verified")
	}
	if rep.ItemsLost != 0 || rep.ItemsDuplicated != 0 {
		t.Errorf("items lost %d, duplicated %d: want 0", rep.ItemsLost, rep.ItemsDuplicated)
	}
	if rep.EventsLost != 0 || rep.EventsDuplicated != 0 || rep.ErrorsLost != 0 {
		t.Errorf("events lost %d, duplicated %d, error frames lost %d: want 0", rep.EventsLost, rep.EventsDuplicated, rep.ErrorsLost)
	}
	if rep.Violations != 0 {
		t.Errorf("%d violations", rep.Violations)
	}
	if !rep.Resources.OK {
		t.Errorf("resources did not return within 10%% of the start: %+v", rep.Resources)
	}
	for _, sh := range []string{"append", "public"} {
		if rep.Rollouts[sh]["completed"] == 0 || rep.Rollouts[sh]["aborted"] == 0 {
			t.Errorf("%s: completed %d, aborted %d: want both > 0", sh, rep.Rollouts[sh]["completed"], rep.Rollouts[sh]["aborted"])
		}
	}
	if c := rep.Chaos; c.BadFrames == 0 || c.BadAppends == 0 || c.CancelsSuspended+c.CancelsSampling == 0 || c.SlowReaders == 0 {
		t.Errorf("some chaos never happened: %+v", c)
	}
	if s := rep.Suspended; s == nil || s.Error != "" || s.HeapPerRollout <= 0 {
		t.Errorf("suspended rollouts: %+v", s)
	}
	if !rep.Pass {
		t.Errorf("the report fails: %v", rep.Failures)
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Errorf("the report does not marshal: %v", err)
	}
}

// TestSoakLanes is the CI soak with lanes on (-lanes 4): a short run with four named lanes
// per connection, each running its own rollouts at the same time; every event must carry its
// rollout's stream_id, and nothing is lost or duplicated per lane.
func TestSoakLanes(t *testing.T) {
	if testing.Short() {
		t.Skip("a short soak; -short skips it")
	}
	cfg := Config{Connections: 12, Turns: 3, Lanes: 4, Duration: 5 * time.Second, Warmup: -1, Suspended: -1,
		Seed: time.Now().UnixNano(), PingInterval: 10 * time.Second, WriteTimeout: 3 * time.Second,
		Rates: Rates{Disconnect: 0.05, Cancel: 0.05, BadFrame: 0.05, BadAppend: 0.03, Slow: -1, Stall: -1}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	rep.WriteText(&buf)
	t.Logf("seed %d\n%s", cfg.Seed, buf.String())
	if rep.Lanes != 4 || rep.Verified == 0 {
		t.Errorf("lanes %d, rollouts verified %d", rep.Lanes, rep.Verified)
	}
	if rep.ItemsLost+rep.ItemsDuplicated+rep.EventsLost+rep.EventsDuplicated+rep.ErrorsLost != 0 || rep.Violations != 0 {
		t.Errorf("lost %d/%d/%d, duplicated %d/%d, violations %d: want 0 (%v)", rep.ItemsLost, rep.EventsLost, rep.ErrorsLost,
			rep.ItemsDuplicated, rep.EventsDuplicated, rep.Violations, rep.Samples)
	}
	if !rep.Pass {
		t.Errorf("the report fails: %v", rep.Failures)
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var n int
	if err := json.Unmarshal([]byte(v), &n); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}
