package session

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"
)

// This file is the connection's outbox: Write queues a frame and returns, and one flushing
// goroutine (started when the outbox goes from empty to not empty, ended when it is empty
// again) sends whatever has queued meanwhile in one batch. A step that emits a burst of
// events (an output item, its deltas, its done events and response.done, produced in
// microseconds) then costs one write to the network instead of one per event, and the rollout
// goes on producing while the network write is in progress. Nothing is reordered: frames leave
// in the order Write queued them, and the queue is bounded (maxOutbox), so a fast lane cannot
// run far ahead of a slow one and a client that stops reading stops its writers.

// BatchWriter is an optional interface of a Transport: WriteBatch sends frames as text
// frames, in order, with as few writes to the network as it can (one for a batch of small
// frames). Its errors are Write's; it does not retain frames or their bytes. Without it the
// outbox writes a batch one Write per frame.
type BatchWriter interface {
	WriteBatch(ctx context.Context, frames [][]byte) error
}

// maxOutbox bounds the bytes a connection's outbox holds before Write waits for the flusher:
// a writer runs at most this far ahead of the network.
const maxOutbox = 64 << 10

// largeFrame is the size from which Write does not copy its frame into the outbox: it waits,
// holding the write lock, until the flusher has written it (the copy would double a large
// frame's memory, and its write takes long enough that overlapping it gains nothing).
const largeFrame = 16 << 10

// outbox holds a connection's queued frames (see the file comment). mu guards every field.
type outbox struct {
	mu      sync.Mutex
	frames  []outFrame
	arena   []byte // the bytes of the copied frames
	bytes   int64  // queued bytes, copied or not
	running bool   // a flusher goroutine is active
	closed  bool   // Close has begun: no flusher starts again
	err     error  // the first write error: later writes fail with it
	// spare* are the previous batch's slices, reused by the next one.
	spareFrames []outFrame
	spareArena  []byte
	space       chan struct{} // signalled (non-blocking) after each batch
	idle        chan struct{} // closed by the flusher when it ends; nil while none runs
}

// outFrame is one queued frame: arena[off:off+n], or large (not copied), whose writer waits
// on done.
type outFrame struct {
	off, n int
	large  []byte
	done   chan error
}

// arenaKeep is the largest arena kept between batches.
const arenaKeep = 256 << 10

// enqueue queues frame, whose n bytes queue counted (see Conn.Write): a frame that is not
// queued is taken off the count here, one that is by the flusher. With inline and no flusher
// running, the calling goroutine flushes (Conn.WriteLast). Called with c.wmu held.
func (c *Conn) enqueue(frame []byte, inline bool) error {
	o := &c.out
	n := int64(len(frame))
	for {
		o.mu.Lock()
		if o.err != nil || o.closed {
			o.mu.Unlock()
			c.unqueue(n)
			return c.closedErr()
		}
		if o.bytes == 0 || o.bytes+n <= maxOutbox {
			break
		}
		o.mu.Unlock()
		select {
		case <-o.space:
		case <-c.ctx.Done():
			c.unqueue(n)
			return c.closedErr()
		}
	}
	var done chan error
	if len(frame) >= largeFrame {
		done = make(chan error, 1)
		o.frames = append(o.frames, outFrame{n: len(frame), large: frame, done: done})
	} else {
		o.frames = append(o.frames, outFrame{off: len(o.arena), n: len(frame)})
		o.arena = append(o.arena, frame...)
	}
	o.bytes += n
	if !o.running {
		o.running = true
		o.idle = make(chan struct{})
		if inline {
			idle := o.idle
			o.mu.Unlock()
			c.flushOutbox(idle)
			if done != nil {
				return <-done
			}
			return c.out.failed()
		}
		go c.flushOutbox(o.idle)
	}
	o.mu.Unlock()
	if done != nil {
		return <-done
	}
	return nil
}

// closedErr is the error of a write to a connection that has ended.
func (c *Conn) closedErr() error {
	if err := c.out.failed(); err != nil {
		return err
	}
	return errConnClosed
}

var errConnClosed = errors.New("session: the connection is closed")

// failed returns the outbox's write error, if any.
func (o *outbox) failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// flushOutbox writes batches until the outbox is empty, then ends (closing idle).
func (c *Conn) flushOutbox(idle chan struct{}) {
	o := &c.out
	for {
		o.mu.Lock()
		if len(o.frames) == 0 {
			o.running = false
			o.idle = nil
			o.mu.Unlock()
			close(idle)
			return
		}
		frames, arena, n := o.frames, o.arena, o.bytes
		o.frames, o.arena = o.spareFrames[:0], o.spareArena[:0]
		o.spareFrames, o.spareArena = nil, nil
		failed := o.err
		o.mu.Unlock()

		err := c.writeBatch(frames, arena, failed)
		c.unqueue(n)

		o.mu.Lock()
		o.bytes -= n
		if err != nil && o.err == nil {
			o.err = err
		}
		clear(frames) // drop the references to large frames
		o.spareFrames = frames[:0]
		if cap(arena) <= arenaKeep {
			o.spareArena = arena[:0]
		}
		o.mu.Unlock()
		select {
		case o.space <- struct{}{}:
		default:
		}
	}
}

// writeBatch writes frames (their bytes in arena) in order: runs of copied frames in one
// BatchWriter call each, a large frame on its own. Large frames' writers get the error of
// their frame (or of the batch before it). With failed (an earlier batch's error) nothing is
// written, and every large frame's writer gets failed: each waits for its answer. The
// watchdog times each write (writeStart).
func (c *Conn) writeBatch(frames []outFrame, arena []byte, failed error) error {
	var batch [][]byte
	err := failed
	flush := func() {
		if len(batch) > 0 && err == nil {
			err = c.send(batch)
		}
		batch = batch[:0]
	}
	for _, f := range frames {
		if f.large == nil {
			batch = append(batch, arena[f.off:f.off+f.n:f.off+f.n])
			continue
		}
		flush()
		if err == nil {
			err = c.send([][]byte{f.large})
		}
		f.done <- err
	}
	flush()
	return err
}

// send writes frames through the transport and counts them. The write is not bound by a
// context (a cancellable one costs the transport a registration per frame): the watchdog
// drops a peer whose write takes longer than Limits.WriteTimeout, and Close aborts the
// transport under a flusher still writing.
func (c *Conn) send(frames [][]byte) error {
	c.writeStart.Store(time.Now().UnixNano())
	var err error
	ctx := context.Background()
	if bw, ok := c.tr.(BatchWriter); ok {
		err = bw.WriteBatch(ctx, frames)
	} else {
		for _, f := range frames {
			if err = c.tr.Write(ctx, f); err != nil {
				break
			}
		}
	}
	c.writeStart.Store(0)
	if err != nil {
		return err
	}
	var b int64
	for _, f := range frames {
		b += int64(len(f))
	}
	c.bytesSent.Add(b)
	c.written.Add(b)
	if c.framesSent.Add(int64(len(frames))) >= flushFrames {
		c.flushCounts()
	}
	return nil
}

// Flush waits until every frame Write queued before it has been written (or has failed) and
// returns the write error, if any: a close frame sent after Flush follows them. It returns
// early, with the connection's error, when the connection ends.
func (c *Conn) Flush() error {
	for {
		c.out.mu.Lock()
		idle, err := c.out.idle, c.out.err
		c.out.mu.Unlock()
		if idle == nil {
			return err
		}
		select {
		case <-idle:
		case <-c.ctx.Done():
			return c.closedErr()
		}
	}
}

// waitOutbox stops the outbox and waits for its flusher to end (Close). A flusher still
// running is writing to a peer the connection is leaving: the transport is aborted under it,
// as a write bound by the connection's context would have been.
func (c *Conn) waitOutbox() {
	c.out.mu.Lock()
	c.out.closed = true
	c.out.err = cmp.Or(c.out.err, errConnClosed)
	idle := c.out.idle
	c.out.mu.Unlock()
	if idle != nil {
		_ = c.tr.Abort()
		<-idle
	}
}
