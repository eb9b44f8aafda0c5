package session

import (
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tetherd/tether/protocol"
)

// createCalls sends a create whose rollout makes n sequential tool calls, and returns its id,
// its first pending call_id and the sequence_number of its response.done.
func createCalls(t *testing.T, p *pipe, n string) (id, call string, seq float64) {
	t.Helper()
	p.send(t, map[string]any{"type": "response.create", "model": "sim", "input": "run the checks",
		"tools": []any{shellTool}, "metadata": map[string]string{"sim.calls": n}})
	fs := p.until(t, protocol.EventDone)
	done := fs[len(fs)-1]
	return fs[0]["response"].(map[string]any)["id"].(string), done["pending_call_ids"].([]any)[0].(string), done["sequence_number"].(float64)
}

func appendOutput(t *testing.T, p *pipe, id, call string) {
	t.Helper()
	p.send(t, map[string]any{"type": "response.append", "response_id": id, "input": []any{
		map[string]any{"type": "function_call_output", "call_id": call, "output": "ok"}}})
}

func usageOf(f map[string]any) map[string]any {
	if u, ok := f["usage"].(map[string]any); ok {
		return u
	}
	u, _ := f["response"].(map[string]any)["usage"].(map[string]any)
	return u
}

// TestParkedRolloutResumesHot: a rollout suspended ParkAfter parks (gauges and snapshot say
// so); its state survives a trip through JSON; an append continues it with the same Response
// id, sequence_number and output_index going on, and the usage (cached_tokens) of a rollout
// that stayed live.
func TestParkedRolloutResumesHot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &Metrics{}
		p, c, stop := serve(t, Options{Limits: Limits{ParkAfter: 30 * time.Second}, Metrics: m})
		defer stop()
		lp, _, lstop := serve(t, Options{}) // stays live: the control
		defer lstop()
		id, call, seq := createCalls(t, p, "2")
		lid, lcall, _ := createCalls(t, lp, "2")

		time.Sleep(30*time.Second - time.Nanosecond)
		synctest.Wait()
		if m.Parked.Load() != 0 || m.Suspended.Load() != 1 {
			t.Fatalf("before ParkAfter: %d parked, %d suspended", m.Parked.Load(), m.Suspended.Load())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if m.Parked.Load() != 1 || m.Suspended.Load() != 0 || m.Parks.Load() != 1 {
			t.Fatalf("after ParkAfter: %d parked, %d suspended, %d parks", m.Parked.Load(), m.Suspended.Load(), m.Parks.Load())
		}
		if s := c.Snapshot(); len(s.Rollouts) != 1 || s.Rollouts[0].State != "parked" {
			t.Fatalf("snapshot %+v", s.Rollouts)
		}
		c.mu.Lock()
		h := c.reg[id]
		b, err := json.Marshal(h.parked)
		if err == nil {
			h.parked = new(parkedRollout)
			err = json.Unmarshal(b, h.parked)
		}
		c.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}

		appendOutput(t, p, id, call)
		appendOutput(t, lp, lid, lcall)
		fs, lfs := p.until(t, protocol.EventDone), lp.until(t, protocol.EventDone)
		for i, f := range fs {
			if got := f["sequence_number"].(float64); got != seq+1+float64(i) {
				t.Fatalf("frame %d (%s): sequence_number %v after %v", i, f["type"], got, seq)
			}
			if f["type"] == string(protocol.EventOutputItemAdded) && f["output_index"].(float64) != 1 {
				t.Fatalf("output_index %v, want 1", f["output_index"])
			}
		}
		done, ldone := fs[len(fs)-1], lfs[len(lfs)-1]
		if done["response_id"] != id {
			t.Fatalf("response.done of %v, want %s", done["response_id"], id)
		}
		u, lu := usageOf(done), usageOf(ldone)
		if b, lb := mustJSON(t, u), mustJSON(t, lu); b != lb {
			t.Fatalf("usage from parked %s, live %s", b, lb)
		}
		if cached := u["input_tokens_details"].(map[string]any)["cached_tokens"].(float64); cached == 0 {
			t.Fatalf("not hot: %v", u)
		}
		if m.Unparks.Load() != 1 || m.Parked.Load() != 0 || m.Suspended.Load() != 1 {
			t.Fatalf("after the append: %d unparks, %d parked, %d suspended", m.Unparks.Load(), m.Parked.Load(), m.Suspended.Load())
		}
		// Parked again, then to its end.
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if m.Parked.Load() != 1 {
			t.Fatalf("%d parked", m.Parked.Load())
		}
		appendOutput(t, p, id, done["pending_call_ids"].([]any)[0].(string))
		fs = p.until(t, protocol.EventCompleted)
		if r := fs[len(fs)-1]["response"].(map[string]any); r["id"] != id || len(r["output"].([]any)) != 3 {
			t.Fatalf("completed %v", r)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestParkedRolloutEnds: a parked rollout ends as a live one would: cancelled, timed out
// (idle_timeout at its suspend timeout), drained (the drain's reason), each with its terminal
// event in sequence.
func TestParkedRolloutEnds(t *testing.T) {
	for _, how := range []string{"cancel", "timeout", "drain"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := &Metrics{}
				p, c, stop := serve(t, Options{Limits: Limits{ParkAfter: 30 * time.Second, SuspendTimeout: time.Minute}, Metrics: m})
				defer stop()
				id, _, seq := createCalls(t, p, "2")
				suspended := time.Now()
				time.Sleep(30 * time.Second)
				synctest.Wait()
				if m.Parked.Load() != 1 {
					t.Fatal("not parked")
				}
				want := protocol.ReasonCancelled
				switch how {
				case "cancel":
					p.send(t, map[string]any{"type": "response.cancel", "response_id": id})
				case "drain":
					go c.Drain(protocol.ReasonServerShutdown)
					want = protocol.ReasonServerShutdown
				case "timeout":
					want = protocol.ReasonIdleTimeout
				}
				f := p.next(t)
				if f["type"] != string(protocol.EventIncomplete) || reason(f) != want || f["sequence_number"].(float64) != seq+1 ||
					f["response"].(map[string]any)["id"] != id {
					t.Fatalf("want response.incomplete (%s) #%v of %s, got %v", want, seq+1, id, f)
				}
				if how == "timeout" {
					if late := time.Since(suspended) - time.Minute; late < 0 || late > 2*time.Second {
						t.Fatalf("timed out %v after the suspend timeout", late)
					}
				}
				synctest.Wait()
				if m.Parked.Load() != 0 || m.Suspended.Load() != 0 {
					t.Fatalf("%d parked, %d suspended", m.Parked.Load(), m.Suspended.Load())
				}
			})
		})
	}
}

// TestUnparkedRolloutTimesOut: a rollout resumed from parked and suspended again keeps the
// connection's suspend timeout: it ends idle_timeout on time, parked again or not.
func TestUnparkedRolloutTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &Metrics{}
		p, _, stop := serve(t, Options{Limits: Limits{ParkAfter: 30 * time.Second, SuspendTimeout: time.Minute}, Metrics: m})
		defer stop()
		id, call, _ := createCalls(t, p, "3")
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if m.Parked.Load() != 1 {
			t.Fatal("not parked")
		}
		appendOutput(t, p, id, call)
		p.until(t, protocol.EventDone)
		suspended := time.Now()
		var f map[string]any
		select {
		case b := <-p.out:
			if err := json.Unmarshal(b, &f); err != nil {
				t.Fatalf("bad frame %q", b)
			}
		case <-time.After(10 * time.Minute):
			t.Fatal("no idle_timeout 10 minutes after the suspension")
		}
		if f["type"] != string(protocol.EventIncomplete) || reason(f) != protocol.ReasonIdleTimeout {
			t.Fatalf("want response.incomplete (idle_timeout), got %v", f)
		}
		if late := time.Since(suspended) - time.Minute; late < 0 || late > 2*time.Second {
			t.Fatalf("timed out %v after the suspend timeout", late)
		}
	})
}

// TestParkRacesAppend: an append that arrives at the instant the rollout parks is never lost
// nor refused: whichever wins, the append continues the rollout to its next response.done.
func TestParkRacesAppend(t *testing.T) {
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			m := &Metrics{}
			p, _, stop := serve(t, Options{Limits: Limits{ParkAfter: 30 * time.Second}, Metrics: m})
			defer stop()
			id, call, seq := createCalls(t, p, "2")
			time.Sleep(30 * time.Second)
			appendOutput(t, p, id, call)
			fs := p.until(t, protocol.EventDone)
			if fs[0]["sequence_number"].(float64) != seq+1 || fs[len(fs)-1]["response_id"] != id {
				t.Fatalf("frames %v", fs)
			}
		})
	}
}

// TestCloseWithParkedRollouts: closing a connection with parked rollouts ends them and leaks
// no goroutine (goleak, TestMain).
func TestCloseWithParkedRollouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &Metrics{}
		p, _, stop := serve(t, Options{Limits: Limits{ParkAfter: time.Second}, Metrics: m})
		for range 3 {
			createCalls(t, p, "2")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if m.Parked.Load() != 3 {
			t.Fatalf("%d parked", m.Parked.Load())
		}
		stop()
		synctest.Wait()
		if m.Parked.Load() != 0 || m.Suspended.Load() != 0 {
			t.Fatalf("after close: %d parked, %d suspended", m.Parked.Load(), m.Suspended.Load())
		}
	})
}

// TestParkedRolloutRefusesBadAppend: an append to a parked rollout that does not answer its
// pending call is refused as for a live one, and the rollout stays parked and resumable.
func TestParkedRolloutRefusesBadAppend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &Metrics{}
		p, _, stop := serve(t, Options{Limits: Limits{ParkAfter: time.Second}, Metrics: m})
		defer stop()
		id, call, seq := createCalls(t, p, "2")
		time.Sleep(time.Second)
		synctest.Wait()
		appendOutput(t, p, id, "call_unknown")
		if f := p.next(t); f["type"] != "error" || f["error"].(map[string]any)["code"] != protocol.CodeToolCallNotFound {
			t.Fatalf("want tool_call_not_found, got %v", f)
		}
		if m.Parked.Load() != 1 || m.Unparks.Load() != 0 {
			t.Fatalf("%d parked, %d unparks", m.Parked.Load(), m.Unparks.Load())
		}
		appendOutput(t, p, id, call)
		if fs := p.until(t, protocol.EventDone); fs[0]["sequence_number"].(float64) != seq+1 {
			t.Fatalf("frames %v", fs)
		}
	})
}
