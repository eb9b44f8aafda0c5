package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tetherd/tether/protocol"
)

// TestAbandonedHeavyWorkNeverRuns: a client sends a body large enough to be heavy work while
// every heavy-work slot is held by others, then hangs up. Its request leaves the slot queue
// at once (every slot is still held when it has), its body is never decoded nor sampled, and
// the access log and tether_errors_total record it as client_closed_request (499), on both
// POST routes that decode a body.
func TestAbandonedHeavyWorkNeverRuns(t *testing.T) {
	text := strings.Repeat("x", 2*protocol.HeavyBytes)
	for _, tc := range []struct{ path, body string }{
		{"/v1/responses", `{"model":"sim","input":"` + text + `"}`},
		{"/v1/chat/completions", `{"model":"sim","messages":[{"role":"user","content":"` + text + `"}]}`},
	} {
		t.Run(strings.TrimPrefix(tc.path, "/v1/"), func(t *testing.T) {
			logs := &logBuffer{}
			// Registered before the server's, this runs after its shutdown: every access line
			// has been written by then.
			t.Cleanup(func() {
				for _, rec := range logs.access(t) {
					if rec["path"] == tc.path && rec["status"] == float64(protocol.StatusClientClosed) && rec["code"] == protocol.CodeClientClosed {
						return
					}
				}
				t.Errorf("no access line of status 499, code client_closed_request:\n%s", logs)
			})
			s, addr := realServer(t, Options{Logger: jsonLogger(logs)})
			held := make([]func(), protocol.CPUSlots())
			for i := range held {
				release, err := protocol.CPUSlot(t.Context(), protocol.HeavyBytes)
				if err != nil {
					t.Fatal(err)
				}
				held[i] = release
			}
			releaseAll := func() {
				for i, release := range held {
					release()
					held[i] = func() {}
				}
			}
			defer releaseAll()
			before := protocol.SlotWaits()

			c := dialRaw(t, addr)
			c.send(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				tc.path, len(tc.body), tc.body))
			waitFor(t, func() bool { return protocol.SlotWaits().Waiting == before.Waiting+1 }) // queued for a slot
			_ = c.Close()
			waitFor(t, func() bool { return protocol.SlotWaits().Abandoned == before.Abandoned+1 })
			waitFor(t, func() bool { return s.httpErrors.snapshot()[protocol.CodeClientClosed] == 1 })
			releaseAll()

			// The server serves on, and the abandoned request did no heavy work after the
			// slots came free: its one wait is the only one since before.
			c2 := dialRaw(t, addr)
			small := `{"model":"sim","input":"hi"}`
			if tc.path == "/v1/chat/completions" {
				small = `{"model":"sim","messages":[{"role":"user","content":"hi"}]}`
			}
			c2.send(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				tc.path, len(small), small))
			if code, body := c2.response(); code != 200 {
				t.Fatalf("a small request after: %d %s", code, body)
			}
			after := protocol.SlotWaits()
			if after.Count != before.Count+1 || after.Waiting != before.Waiting {
				t.Fatalf("%d slot waits since, %d waiting: the abandoned request went on", after.Count-before.Count, after.Waiting)
			}
			if n := s.counters.New.Load(); tc.path == "/v1/responses" && n != 1 {
				t.Fatalf("%d creates ran, want only the small one", n)
			}
			c2.get("/metrics")
			code, metrics := c2.response()
			if code != 200 {
				t.Fatalf("/metrics: %d", code)
			}
			for _, want := range []string{
				`tether_errors_total{code="client_closed_request"} 1`,
				fmt.Sprintf("tether_cpu_slot_abandoned_total %d", after.Abandoned),
				fmt.Sprintf("tether_cpu_slot_wait_seconds_count %d", after.Count),
				`tether_cpu_slot_wait_seconds_bucket{le="0.001"}`,
				fmt.Sprintf("tether_cpu_slots %d", protocol.CPUSlots()),
				"tether_cpu_slot_waiting 0",
			} {
				if !strings.Contains(metrics, want) {
					t.Errorf("/metrics lacks %q", want)
				}
			}
		})
	}
}
