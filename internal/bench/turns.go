package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/internal/peer"
	"github.com/tetherd/tether/sampler/sim"
)

// TurnsResult is one aggregate turns/s measurement: Rollouts append-shape connections, each
// running one rollout of Calls sequential tool calls (Calls+1 turns) at once.
type TurnsResult struct {
	Rollouts           int     `json:"rollouts"`
	Calls              int     `json:"calls"`
	Turns              int     `json:"turns"`
	Seconds            float64 `json:"seconds"`
	TurnsPerS          float64 `json:"turns_per_s"`
	ServerCPUS         float64 `json:"server_cpu_s"` // -1 when not measured
	ServerCPUUSPerTurn float64 `json:"server_cpu_us_per_turn,omitempty"`
}

// turns measures the agent-loop rate: n append-shape connections each run one rollout of
// calls sequential tool calls (metadata sim.calls, one small tool output per call), all
// started at once; a turn is a create or an append answered up to its response.done or
// terminal event. It runs only on the append shape: it measures the server's turn machinery,
// which the four transports' overhead tables compare per turn.
func (b *bencher) turns(ctx context.Context, n, calls int) (*TurnsResult, error) {
	create := []byte(`{"type":"response.create","model":"sim","input":"Run the tool until done.","tools":[` + execToolJSON +
		`],"metadata":{"` + sim.MetaCalls + `":"` + strconv.Itoa(calls) + `","` + sim.MetaSpeed + `":"` + b.speed.String() + `"}}`)
	run, err := b.concurrent(ctx, n, func() string { return fmt.Sprintf("turns/s: %d rollout(s) of %d calls", n, calls) },
		func(ctx context.Context, c *websocket.Conn) (int, error) { return loop(ctx, c, create) })
	if err != nil {
		return nil, err
	}
	res := &TurnsResult{Rollouts: n, Calls: calls, Turns: run.count, Seconds: run.elapsed.Seconds(), ServerCPUS: -1}
	res.TurnsPerS = float64(res.Turns) / run.elapsed.Seconds()
	if run.cpu >= 0 {
		res.ServerCPUS = run.cpu.Seconds()
		if res.Turns > 0 {
			res.ServerCPUUSPerTurn = float64(run.cpu) / float64(time.Microsecond) / float64(res.Turns)
		}
	}
	return res, nil
}

// execToolJSON is the one function tool of the turns/s rollouts.
const execToolJSON = `{"type":"function","name":"exec_command","parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}}`

// loop runs one append rollout to its end, answering every pending call with a short output,
// and returns the number of turns (the create, then one per append).
func loop(ctx context.Context, c *websocket.Conn, create []byte) (int, error) {
	if err := c.Write(ctx, websocket.MessageText, create); err != nil {
		return 0, err
	}
	buf := make([]byte, 0, 16<<10)
	turns := 1
	for {
		_, rd, err := c.Reader(ctx)
		if err != nil {
			return turns, err
		}
		if buf, err = readAll(buf[:0], rd); err != nil {
			return turns, err
		}
		switch typ := peer.EventType(buf); {
		case typ == "error":
			return turns, fmt.Errorf("server error: %.300s", buf)
		case typ == "response.completed":
			return turns, nil
		case peer.IsTerminal(typ):
			return turns, fmt.Errorf("rollout ended %s: %.300s", typ, buf)
		case typ == "response.done":
			frame, err := answerDone(buf)
			if err != nil {
				return turns, err
			}
			if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
				return turns, err
			}
			turns++
		}
	}
}

// answerDone answers a response.done: one short function_call_output per pending call.
func answerDone(done []byte) ([]byte, error) {
	var d struct {
		ResponseID string   `json:"response_id"`
		Pending    []string `json:"pending_call_ids"`
	}
	if err := json.Unmarshal(done, &d); err != nil {
		return nil, fmt.Errorf("bad response.done: %w", err)
	}
	var f bytes.Buffer
	f.WriteString(`{"type":"response.append","response_id":"` + d.ResponseID + `","input":[`)
	for i, id := range d.Pending {
		if i > 0 {
			f.WriteByte(',')
		}
		f.WriteString(`{"type":"function_call_output","call_id":"` + id + `","output":"ok"}`)
	}
	f.WriteString(`]}`)
	return f.Bytes(), nil
}
