package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/internal/peer"
	"github.com/tetherd/tether/sampler/sim"
)

// events measures streaming throughput: n append-shape connections each run one rollout whose
// answer is about tokens tokens long (metadata sim.answer_tokens, sim at instant, about one
// output_text.delta per token), all started at once. It counts every event of every rollout
// from the first create written to the last terminal event read.
func (b *bencher) events(ctx context.Context, n, tokens int) (*EventsResult, error) {
	frame := []byte(`{"type":"response.create","model":"sim","input":"Stream a long answer, please.","metadata":{"` +
		sim.MetaAnswerTokens + `":"` + strconv.Itoa(tokens) + `","` + sim.MetaSpeed + `":"` + b.speed.String() + `"}}`)
	run, err := b.concurrent(ctx, n, func() string { return fmt.Sprintf("events/s: %d rollout(s) streaming", n) },
		func(ctx context.Context, c *websocket.Conn) (int, error) { return stream(ctx, c, frame) })
	if err != nil {
		return nil, err
	}
	res := &EventsResult{Rollouts: n, AnswerTokens: tokens, Seconds: run.elapsed.Seconds(), ServerCPUS: -1, Events: run.count}
	res.EventsPerS = float64(res.Events) / run.elapsed.Seconds()
	if run.cpu >= 0 {
		res.ServerCPUS = run.cpu.Seconds()
		if res.Events > 0 {
			res.ServerCPUUSPerEvent = float64(run.cpu) / float64(time.Microsecond) / float64(res.Events)
		}
	}
	return res, nil
}

// concurrentRun is what concurrent measured: the sum of the counts, the wall time from the
// start to the last connection's end, and the server's CPU time over it (-1 when not read).
type concurrentRun struct {
	count   int
	elapsed time.Duration
	cpu     time.Duration
}

// concurrent dials n append-shape connections, then runs one on each at once and sums the
// counts they return. label names the measurement on the progress line.
func (b *bencher) concurrent(ctx context.Context, n int, label func() string,
	one func(ctx context.Context, c *websocket.Conn) (int, error)) (concurrentRun, error) {
	conns := make([]*websocket.Conn, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				_ = c.CloseNow()
			}
		}
	}()
	hc := newHTTPClient(&counter{})
	defer hc.CloseIdleConnections()
	for i := range conns {
		c, err := dialWS(ctx, b.ep.ws, b.cfg.APIKey, true, hc)
		if err != nil {
			return concurrentRun{}, err
		}
		conns[i] = c
	}
	var c0 time.Duration
	if b.cpu {
		c0, _ = readCPU(b.cfg.PID)
	}
	counts := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			counts[i], errs[i] = one(ctx, c)
		}()
	}
	t0 := time.Now()
	close(start)
	stop := b.prog.ticker(label)
	wg.Wait()
	stop()
	run := concurrentRun{elapsed: time.Since(t0), cpu: -1}
	for i := range conns {
		if errs[i] != nil {
			return run, fmt.Errorf("rollout %d: %w", i+1, errs[i])
		}
		run.count += counts[i]
	}
	if b.cpu {
		c1, _ := readCPU(b.cfg.PID)
		run.cpu = c1 - c0
	}
	return run, nil
}

// stream sends frame and reads until the rollout's terminal event, reusing one buffer.
func stream(ctx context.Context, c *websocket.Conn, frame []byte) (int, error) {
	if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
		return 0, err
	}
	buf := make([]byte, 0, 64<<10)
	n := 0
	for {
		_, rd, err := c.Reader(ctx)
		if err != nil {
			return n, err
		}
		if buf, err = readAll(buf[:0], rd); err != nil {
			return n, err
		}
		n++
		typ := peer.EventType(buf)
		switch {
		case typ == "error":
			return n, fmt.Errorf("server error: %.300s", buf)
		case typ == "response.completed":
			return n, nil
		case peer.IsTerminal(typ):
			return n, fmt.Errorf("rollout ended %s: %.300s", typ, buf)
		}
	}
}
