package session

import (
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler/sim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var shellTool = map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{
	"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}, "required": []string{"cmd"}}}

// serve runs the append shape over a pipe inside the current bubble; the returned function
// disconnects the client and waits for the connection to end.
func serve(t *testing.T, opts Options) (*pipe, *Conn, func()) {
	t.Helper()
	if opts.Model == nil {
		opts.Model = sim.NewSim(sim.SimOptions{Speed: sim.SpeedInstant})
	}
	p := newPipe()
	c := NewConn(p, opts)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = ServeAppend(c)
	}()
	return p, c, func() {
		_ = p.Close(protocol.CloseNormal, "")
		<-served
	}
}

func reason(f map[string]any) string {
	r, _ := f["response"].(map[string]any)
	d, _ := r["incomplete_details"].(map[string]any)
	s, _ := d["reason"].(string)
	return s
}

func TestSuspendTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _, stop := serve(t, Options{Limits: Limits{SuspendTimeout: time.Minute}})
		defer stop()
		p.send(t, map[string]any{"type": "response.create", "model": "sim", "input": "hi", "tools": []any{shellTool}})
		p.until(t, protocol.EventDone)
		start := time.Now()
		f := p.until(t, protocol.EventIncomplete)
		if got := reason(f[len(f)-1]); got != protocol.ReasonIdleTimeout {
			t.Fatalf("reason %q", got)
		}
		if waited := time.Since(start); waited != time.Minute {
			t.Fatalf("ended after %v, want the 1m suspend timeout", waited)
		}
	})
}

func TestConnectionAgeLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _, stop := serve(t, Options{Limits: Limits{MaxConnectionAge: time.Hour, SuspendTimeout: -1}})
		defer stop()
		p.send(t, map[string]any{"type": "response.create", "model": "sim", "input": "hi", "tools": []any{shellTool}})
		p.until(t, protocol.EventDone)
		f := p.until(t, protocol.EventIncomplete)
		if got := reason(f[len(f)-1]); got != protocol.ReasonConnectionLimit {
			t.Fatalf("reason %q", got)
		}
		e := p.next(t)
		if e["type"] != "error" || e["error"].(map[string]any)["code"] != protocol.CodeConnectionLimit {
			t.Fatalf("want the connection limit error frame, got %v", e)
		}
		<-p.done
		if p.closeCode() != protocol.CloseGoingAway {
			t.Fatalf("close %d, want 1001", p.closeCode())
		}
	})
}

func TestShutdownGraceCutsSamplingRollout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := sim.NewSim(sim.SimOptions{Speed: sim.Speed65, Realtime: true})
		p, c, stop := serve(t, Options{Model: slow, Limits: Limits{ShutdownGrace: 100 * time.Millisecond}})
		defer stop()
		p.send(t, map[string]any{"type": "response.create", "model": "sim", "input": "a long story please",
			"metadata": map[string]string{"sim.answer_tokens": "500"}})
		p.until(t, protocol.EventOutputTextDelta)
		start := time.Now()
		go c.Drain(protocol.ReasonServerShutdown)
		f := p.until(t, protocol.EventIncomplete)
		if got := reason(f[len(f)-1]); got != protocol.ReasonServerShutdown {
			t.Fatalf("reason %q", got)
		}
		if waited := time.Since(start); waited != 100*time.Millisecond {
			t.Fatalf("cut after %v, want the 100ms grace", waited)
		}
		<-p.done
		if p.closeCode() != protocol.CloseGoingAway {
			t.Fatalf("close %d, want 1001", p.closeCode())
		}
		synctest.Wait()
	})
}
