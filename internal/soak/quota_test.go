package soak

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/session"
)

// calm is a short soak against url without chaos, for the tests of the suspended measurement.
func calm(url string, connections, suspended int) Config {
	return Config{URL: url, Connections: connections, Turns: 2, Duration: time.Second, Warmup: -1, Suspended: suspended,
		Settle: 5 * time.Second, Grace: 10 * time.Second, Seed: 1,
		Rates: Rates{Disconnect: -1, Cancel: -1, BadFrame: -1, BadAppend: -1, Slow: -1, Stall: -1}}
}

// TestSoakFitsTheServersKeyQuota: against a running server whose per-key quota of live
// rollouts is smaller than -suspended, the suspended measurement holds as many as fit (the
// timed rollout included) and says so; the figure is measured, not an error.
func TestSoakFitsTheServersKeyQuota(t *testing.T) {
	if testing.Short() {
		t.Skip("a short soak against a server; -short skips it")
	}
	// 100 live rollouts per key: the load's two connections stay below it (a public-shape
	// connection keeps its answered chains suspended, at most -max-suspended, 64).
	_, base := servertest.Start(t, server.Options{KeyRollouts: 100, Limits: session.Limits{MaxSuspended: 64}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, calm(base, 2, 200))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	rep.WriteText(&buf)
	t.Logf("\n%s", buf.String())
	s := rep.Suspended
	if s == nil || s.Error != "" || s.Rollouts != 99 || s.Requested != 200 || s.ServerSuspended < 99 || s.Resumes == 0 {
		t.Fatalf("suspended measurement: %+v, want 99 rollouts held (quota 100 with the timed one), requested 200", s)
	}
	if rep.Violations != 0 || rep.Errors["quota_exceeded"] != 0 {
		t.Errorf("the load ran into the quota: %d violations, errors %v", rep.Violations, rep.Errors)
	}
	for _, f := range rep.Failures {
		if strings.Contains(f, "suspended") {
			t.Errorf("failure %q", f)
		}
	}
	if !strings.Contains(buf.String(), "99 held instead of -suspended 200") {
		t.Errorf("the report does not say the measurement was lowered")
	}
}

// TestSoakFailedMeasurementFails: a suspended measurement that the server refuses (here its
// cap of live rollouts per connection is below the 50 the measurement holds on each) makes the
// soak fail, with the error on a FAIL line.
func TestSoakFailedMeasurementFails(t *testing.T) {
	if testing.Short() {
		t.Skip("a short soak against a server; -short skips it")
	}
	_, base := servertest.Start(t, server.Options{Limits: session.Limits{MaxSuspended: 10}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, calm(base, 2, 20))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	rep.WriteText(&buf)
	out := buf.String()
	t.Logf("\n%s", out)
	if rep.Pass || rep.Suspended == nil || rep.Suspended.Error == "" {
		t.Fatalf("pass %v, suspended %+v: want a failed measurement and a failed soak", rep.Pass, rep.Suspended)
	}
	if !strings.Contains(out, "\nFAIL: ") || !strings.Contains(out, "suspended rollouts: "+rep.Suspended.Error) || strings.Contains(out, "\nPASS") {
		t.Errorf("the report does not end with the measurement's failure")
	}
}

// TestSoakRefusesMoreConnectionsThanTheKeyQuota: -connections above the server's per-key
// connection quota is an error before any load, naming the flag to raise.
func TestSoakRefusesMoreConnectionsThanTheKeyQuota(t *testing.T) {
	_, base := servertest.Start(t, server.Options{KeyConnections: 4})
	_, err := Run(context.Background(), calm(base, 6, 0))
	if err == nil || !strings.Contains(err.Error(), "-key-connections") || !strings.Contains(err.Error(), "quota of 4") {
		t.Fatalf("err %v, want the per-key connection quota named", err)
	}
}
