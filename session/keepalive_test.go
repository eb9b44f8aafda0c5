package session

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler/sim"
)

// keepalives counts the keepalives among a response's frames: the response.in_progress
// events after its first.
func keepalives(frames []map[string]any) int {
	n := 0
	for _, f := range frames {
		if f["type"] == string(protocol.EventInProgress) {
			n++
		}
	}
	return max(n-1, 0)
}

// TestKeepAliveWriters: the watchdog starts a goroutine to write keepalives only when one is
// due. A rollout that streams for 10 s (deltas a few milliseconds apart, 100 watchdog ticks)
// starts none; one quiet in a long prefill starts one per keepalive it is sent.
func TestKeepAliveWriters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 400 * time.Millisecond // a watchdog tick every 100 ms
		p, c, stop := serve(t, Options{Model: sim.NewSim(sim.SimOptions{Realtime: true, Speed: sim.Speed1000}),
			Limits: Limits{KeepAlive: interval}})
		defer stop()

		p.send(t, map[string]any{"type": "response.create", "model": "sim", "input": "hi",
			"metadata": map[string]string{sim.MetaAnswerTokens: "10000"}}) // 10 s at 1,000 tokens/s
		start := time.Now()
		frames := p.until(t, protocol.EventCompleted)
		streamed := time.Since(start)
		if streamed < 5*time.Second {
			t.Fatalf("the answer streamed for %v only; the test needs seconds of watchdog ticks", streamed)
		}
		if n, w := keepalives(frames), c.keepWriters.Load(); n != 0 || w != 0 {
			t.Fatalf("a rollout streaming for %v got %d keepalives and started %d keepalive writers; want none", streamed, n, w)
		}
		t.Logf("streaming for %v (%d watchdog ticks): %d keepalive writers", streamed, streamed/(interval/4), c.keepWriters.Load())

		// About 40,000 tokens to prefill at the 65 preset's 3,000 tokens/s: 13 s quiet.
		p.send(t, map[string]any{"type": "response.create", "model": "sim", "input": strings.Repeat("word ", 40000),
			"metadata": map[string]string{sim.MetaSpeed: "65", sim.MetaAnswerTokens: "10"}})
		start = time.Now()
		frames = p.until(t, protocol.EventCompleted)
		quiet := time.Since(start)
		n, w := keepalives(frames), c.keepWriters.Load()
		if n < int(quiet/interval)/2 {
			t.Fatalf("a rollout quiet for %v got %d keepalives at a %v interval", quiet, n, interval)
		}
		// The last writer may find the step's first event written meanwhile: it sends nothing.
		if w < int64(n) || w > int64(n)+1 {
			t.Fatalf("%d keepalive writers started for %d keepalives in %v (%d watchdog ticks); want one per keepalive", w, n, quiet, quiet/(interval/4))
		}
		t.Logf("quiet for %v (%d watchdog ticks): %d keepalives, %d keepalive writers", quiet, quiet/(interval/4), n, w)
	})
}
