package session

import (
	"time"

	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler/sim"
)

// batchPipe is a Transport with WriteBatch that records each batch; while gate is open
// (nil) it writes at once, else each WriteBatch waits for a value on gate.
type batchPipe struct {
	*pipe
	gate chan struct{}
	fail error

	mu      sync.Mutex
	batches [][]string
}

func newBatchPipe() *batchPipe { return &batchPipe{pipe: newPipe(), gate: make(chan struct{})} }

func (b *batchPipe) WriteBatch(ctx context.Context, frames [][]byte) error {
	if b.gate != nil {
		select {
		case <-b.gate:
		case <-b.done:
			return errPipeClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if b.fail != nil {
		return b.fail
	}
	batch := make([]string, len(frames))
	for i, f := range frames {
		batch[i] = string(f)
	}
	b.mu.Lock()
	b.batches = append(b.batches, batch)
	b.mu.Unlock()
	return nil
}

func (b *batchPipe) recorded() [][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([][]string(nil), b.batches...)
}

// TestOutboxCoalescesBurst: frames written while a write is in progress leave together, in
// the order they were written, and Write does not retain the caller's buffer.
func TestOutboxCoalescesBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newBatchPipe()
		c := NewConn(tr, Options{})
		defer c.Close()
		buf := []byte("frame-0")
		if err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the flusher holds frame 0 in WriteBatch
		for i := 1; i < 10; i++ {
			buf = fmt.Appendf(buf[:0], "frame-%d", i) // the same buffer, rewritten
			if err := c.Write(buf); err != nil {
				t.Fatal(err)
			}
		}
		tr.gate <- struct{}{}
		tr.gate <- struct{}{}
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
		got := tr.recorded()
		if len(got) != 2 || len(got[0]) != 1 || len(got[1]) != 9 {
			t.Fatalf("batches %q, want frame 0 alone and then frames 1-9 in one batch", got)
		}
		for i, f := range append(got[0], got[1]...) {
			if want := fmt.Sprintf("frame-%d", i); f != want {
				t.Fatalf("frame %d is %q, want %q (batches %q)", i, f, want, got)
			}
		}
	})
}

// TestOutboxBoundsQueue: a writer waits once maxOutbox bytes are queued, and goes on when the
// network write makes room.
func TestOutboxBoundsQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newBatchPipe()
		c := NewConn(tr, Options{})
		defer c.Close()
		frame := bytes.Repeat([]byte("x"), 4<<10)
		const n = 2*maxOutbox/(4<<10) + 2
		written := make(chan int, n)
		go func() {
			for i := range n {
				if err := c.Write(frame); err != nil {
					t.Error(err)
					return
				}
				written <- i
			}
		}()
		synctest.Wait()
		if len(written) >= n-1 {
			t.Fatalf("%d of %d frames written while the network write is stuck: the queue is not bounded", len(written), n)
		}
		if q := c.outboxBytes(); q > maxOutbox+int64(len(frame)) {
			t.Fatalf("%d bytes queued, bound %d", q, maxOutbox)
		}
		close(tr.gate)
		for range n {
			<-written
		}
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, b := range tr.recorded() {
			total += len(b)
		}
		if total != n {
			t.Fatalf("%d frames reached the transport, want %d", total, n)
		}
	})
}

// TestOutboxLargeFrameWaits: Write of a large frame returns once it has been written, so its
// buffer is not copied and its error is the write's.
func TestOutboxLargeFrameWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newBatchPipe()
		tr.gate = nil
		tr.fail = errors.New("peer gone")
		c := NewConn(tr, Options{})
		defer c.Close()
		err := c.Write(make([]byte, largeFrame))
		if !errors.Is(err, tr.fail) {
			t.Fatalf("Write of a large frame: %v, want the write's error", err)
		}
		if err := c.Write([]byte("small")); !errors.Is(err, tr.fail) {
			t.Fatalf("Write after a failed write: %v, want the same error", err)
		}
		if c.outboxBytes() != 0 || c.queuedBytes() != 0 {
			t.Fatalf("outbox %d bytes, queue %d bytes after failed writes, want 0", c.outboxBytes(), c.queuedBytes())
		}
	})
}

// TestOutboxCloseWithPending: Close with frames queued behind a stuck write ends the flusher
// (goleak in TestMain) and later writes fail.
func TestOutboxCloseWithPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newBatchPipe()
		c := NewConn(tr, Options{})
		for range 5 {
			if err := c.Write([]byte("pending")); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
		if err := c.Write([]byte("late")); err == nil {
			t.Fatal("Write after Close succeeded")
		}
		if c.queuedBytes() != 0 {
			t.Fatalf("%d bytes still counted as queued after Close", c.queuedBytes())
		}
	})
}

func (c *Conn) outboxBytes() int64 {
	c.out.mu.Lock()
	defer c.out.mu.Unlock()
	return c.out.bytes
}

func (c *Conn) queuedBytes() int64 {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return c.queued
}

// TestDrainDropsAPeerThatDoesNotRead: a rollout whose writes are stuck behind a client that
// does not read cannot end on its own; the drain drops the peer drainFlush after the grace
// instead of waiting for the write timeout, and every goroutine ends.
func TestDrainDropsAPeerThatDoesNotRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newBatchPipe() // the network write never completes: gate stays closed
		c := NewConn(tr, Options{Model: sim.NewSim(sim.SimOptions{Speed: sim.SpeedInstant}), Limits: Limits{ShutdownGrace: time.Second}})
		served := make(chan struct{})
		go func() {
			defer close(served)
			_ = ServeAppend(c)
		}()
		tr.send(t, map[string]any{"type": "response.create", "model": "sim", "input": "x",
			"metadata": map[string]string{"sim.answer_tokens": "100000"}})
		synctest.Wait() // the rollout is stuck: its outbox is full
		if q := c.outboxBytes(); q < maxOutbox/2 {
			t.Fatalf("outbox holds %d bytes, want it full behind the stuck write", q)
		}
		start := time.Now()
		c.Drain(protocol.ReasonServerShutdown)
		if took := time.Since(start); took != time.Second+drainFlush {
			t.Fatalf("drain took %v, want the grace (1s) plus %v", took, drainFlush)
		}
		if code := tr.closeCode(); code != pipeAborted {
			t.Fatalf("close code %d, want the peer aborted", code)
		}
		<-served
		c.Close()
	})
}

// TestWriteLastFlushesInline: WriteLast with no flush in progress writes what is queued
// before it returns, on the calling goroutine; with one in progress it queues behind it, in
// order.
func TestWriteLastFlushesInline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newBatchPipe()
		tr.gate = nil
		c := NewConn(tr, Options{})
		defer c.Close()
		if err := c.WriteLast([]byte("done")); err != nil {
			t.Fatal(err)
		}
		if got := tr.recorded(); len(got) != 1 || got[0][0] != "done" {
			t.Fatalf("after WriteLast: %q, want the frame written", got)
		}

		tr2 := newBatchPipe()
		c2 := NewConn(tr2, Options{})
		defer c2.Close()
		if err := c2.Write([]byte("delta")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the flusher holds "delta" in WriteBatch
		if err := c2.WriteLast([]byte("done")); err != nil {
			t.Fatal(err)
		}
		close(tr2.gate)
		if err := c2.Flush(); err != nil {
			t.Fatal(err)
		}
		var frames []string
		for _, b := range tr2.recorded() {
			frames = append(frames, b...)
		}
		if strings.Join(frames, ",") != "delta,done" {
			t.Fatalf("frames %q, want delta then done", frames)
		}
	})
}
