package deploy

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/redistest"
)

// drillDuration is how long the drill's load and restarts run: TETHER_DRILL_DURATION (a Go
// duration), default 15s. At least one cycle runs whatever the duration: a SIGTERM restart
// of each instance in turn, then a SIGKILL of one instance and its restart.
func drillDuration(t *testing.T) time.Duration {
	s := os.Getenv("TETHER_DRILL_DURATION")
	if s == "" {
		return 15 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("TETHER_DRILL_DURATION=%q: want a positive Go duration such as 5m", s)
	}
	return d
}

// drillReattach reports whether the drill runs its reattaching clients:
// TETHER_DRILL_REATTACH, 1 (the default) or 0.
func drillReattach(t *testing.T) bool {
	switch s := os.Getenv("TETHER_DRILL_REATTACH"); s {
	case "", "1":
		return true
	case "0":
		return false
	default:
		t.Fatalf("TETHER_DRILL_REATTACH=%q: want 1 (run the reattaching clients, the default) or 0", s)
		return false
	}
}

// drillLogs returns the directory for the instances' logs and whether they log at debug
// level: TETHER_DRILL_LOGS names a directory that keeps them, at debug level, after the test;
// by default they go to a temporary directory, at warn level.
func drillLogs(t *testing.T) (dir string, debug bool) {
	dir = os.Getenv("TETHER_DRILL_LOGS")
	if dir == "" {
		return t.TempDir(), false
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("TETHER_DRILL_LOGS=%q: %v", dir, err)
	}
	return dir, true
}

// TestRestartDrill runs three `tether serve` processes sharing one redis-server
// behind nginx, under a load of rollouts of both shapes, restarted one after another with
// SIGTERM and one killed with SIGKILL; every rollout must end with an answer that quotes
// every tool output once, in order.
func TestRestartDrill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the drill")
	}
	rs := redistest.Start(t)
	dur := drillDuration(t)
	bin := buildTether(t)
	logs, debug := drillLogs(t)
	var ins []*instance
	var addrs []string
	for range 3 {
		in := &instance{bin: bin, store: rs.URL(), logDir: logs, debug: debug, port: fixedPort(t)}
		if err := in.start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(in.kill)
		ins = append(ins, in)
		addrs = append(addrs, in.addr())
	}
	base := startNginx(t, addrs)
	wsURL := "ws" + strings.TrimPrefix(base, "http") + "/v1/responses"

	n := &drillCounts{}
	ctx, cancel := context.WithTimeout(context.Background(), dur+90*time.Second)
	defer cancel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 9 {
		c := &drillClient{id: i, kind: drillKind(i % 3), url: wsURL, turns: 4, n: n}
		wg.Go(func() { c.run(ctx, stop) })
	}
	f := &reattachFigures{}
	reattach := drillReattach(t)
	if !reattach {
		t.Log("reattaching clients off (TETHER_DRILL_REATTACH=0)")
	}
	clients := 0
	if reattach {
		clients = reattachClients
	}
	for i := range clients {
		c := &reattachClient{id: i, url: wsURL, turns: 6, toolTime: reattachToolTime + time.Duration(i)*reattachToolStep, n: n, f: f}
		wg.Go(func() { c.run(ctx, stop) })
	}

	restarts, kills, err := chaos(ins, dur)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Error(err)
	}
	report := fmt.Sprintf("drill %s: %d SIGTERM restarts, %d SIGKILL; rollouts %d started, %d completed and verified; "+
		"%d segments; %d terminal events seen (drain); %d resumed from the last stored response, %d restarted "+
		"(nothing stored yet); %d store:false recovered with the full input after previous_response_not_found; "+
		"%d refused while draining; %d tool outputs sent; dials %d (%d failed); lost %d, duplicated %d; violations %d",
		dur, restarts, kills, n.rollouts.Load(), n.completed.Load(), n.segments.Load(), n.terminalSeen.Load(),
		n.resumedStored.Load(), n.restartedFresh.Load(), n.notFoundRecovered.Load(), n.refused.Load(),
		n.toolOutputs.Load(), n.dials.Load(), n.dialFailures.Load(), n.lost.Load(), n.duplicated.Load(), len(n.violations))
	t.Log(report)
	if reattach {
		t.Log(f)
	}
	for _, v := range n.violations {
		t.Error(v)
	}
	if n.lost.Load() != 0 || n.duplicated.Load() != 0 {
		t.Errorf("items lost %d, duplicated %d", n.lost.Load(), n.duplicated.Load())
	}
	if n.completed.Load() != n.rollouts.Load() {
		t.Errorf("%d rollouts started, %d completed", n.rollouts.Load(), n.completed.Load())
	}
	if n.completed.Load() == 0 {
		t.Error("no rollout completed")
	}
	if reattach {
		checkReattach(t, f)
	}
}

// The drill's reattaching clients: enough of them, with tools slow enough, that each SIGTERM
// finds a few of their rollouts suspended on the instance it stops. Client i's tools take
// reattachToolTime + i×reattachToolStep, so that the clients do not run in step.
const (
	reattachClients  = 12
	reattachToolTime = 500 * time.Millisecond
	reattachToolStep = 50 * time.Millisecond
)

// checkReattach asserts the reattaching clients' figures: every rollout answered, every
// parked rollout resumed as the same Response, at least 90% of the rollouts that a SIGTERM
// caught suspended resumed hot (a suspended rollout the drain ended instead of parking it
// counts as a cold resume), every live append hot.
func checkReattach(t *testing.T, f *reattachFigures) {
	t.Helper()
	if f.completed.Load() != f.rollouts.Load() || f.completed.Load() == 0 {
		t.Errorf("reattach: %d rollouts started, %d completed", f.rollouts.Load(), f.completed.Load())
	}
	if f.parked.Load() == 0 {
		t.Error("reattach: no rollout was parked by a SIGTERM")
	}
	if n := f.parked.Load() + f.parkedKilled.Load(); n > f.parkEvents.Load() {
		t.Errorf("reattach: %d resumes from parked counted, %d response.parked received", n, f.parkEvents.Load())
	}
	if f.sameID.Load() != f.parked.Load() {
		t.Errorf("reattach: %d parked rollouts resumed, %d with the same Response id", f.parked.Load(), f.sameID.Load())
	}
	if share := f.hotShare(); share < 90 {
		t.Errorf("reattach: %.1f%% of the rollouts caught suspended by a SIGTERM resumed hot (%d parked, %d hot, %d ended instead), want at least 90%%",
			share, f.parked.Load(), f.hot.Load(), f.coldContinued.Load())
	}
	if f.liveHot.Load() != f.liveSteps.Load() {
		t.Errorf("reattach: %d of %d live appends were hot, want all", f.liveHot.Load(), f.liveSteps.Load())
	}
}

// restartGap separates the restarts: longer than nginx.conf's fail_timeout (5s), so that
// nginx has taken the restarted instance back into rotation before the next one goes down.
const restartGap = 5500 * time.Millisecond

// chaos restarts the instances one after another with SIGTERM, then kills one with SIGKILL
// and restarts it, and repeats until dur has passed (at least once).
func chaos(ins []*instance, dur time.Duration) (restarts, kills int, err error) {
	end := time.Now().Add(dur)
	time.Sleep(time.Second)
	for cycle := 0; cycle == 0 || time.Now().Before(end); cycle++ {
		for _, in := range ins {
			if err := in.stop(syscall.SIGTERM); err != nil {
				return restarts, kills, err
			}
			if err := in.start(); err != nil {
				return restarts, kills, err
			}
			restarts++
			time.Sleep(restartGap)
		}
		in := ins[cycle%len(ins)]
		if err := in.stop(syscall.SIGKILL); err != nil {
			return restarts, kills, err
		}
		kills++
		time.Sleep(200 * time.Millisecond)
		if err := in.start(); err != nil {
			return restarts, kills, err
		}
		time.Sleep(restartGap)
	}
	return restarts, kills, nil
}
