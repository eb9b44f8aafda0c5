package session

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/session/store"
)

// Defaults of Options and Limits.
const (
	DefaultSuspendTimeout = 10 * time.Minute
	DefaultQueueDepth     = 16
	DefaultCacheResponses = 128
	DefaultCacheBytes     = 64 << 20
	DefaultShutdownGrace  = 30 * time.Second
	DefaultWriteTimeout   = 30 * time.Second
	DefaultKeepAlive      = 5 * time.Second
	DefaultMaxInflight    = 16
	DefaultMaxLanes       = 32
)

// Limits are the tunables of a connection that a server sets once for all of its
// connections: Options embeds them, and so do the server's options, which pass them through
// unchanged. The zero value works: each field gives its unit, what 0 means and its default.
type Limits struct {
	// MaxFrame is the largest client frame in bytes (-max-frame), used in the
	// websocket_message_too_large error; the server bounds a POST body by it too.
	// 0 means DefaultMaxFrame (32 MiB).
	MaxFrame int64
	// MaxConnectionAge is the connection age limit (-max-connection-age): when it passes, the
	// connection drains with reason connection_limit, sends websocket_connection_limit_reached
	// and closes 1001. The server applies it to WebSocket connections only, not to the
	// connection core of an HTTP request. 0 means no limit (the command's default is 60m).
	MaxConnectionAge time.Duration
	// SuspendTimeout ends a rollout suspended longer than this (incomplete, idle_timeout).
	// 0 means DefaultSuspendTimeout (10 minutes); negative means never.
	SuspendTimeout time.Duration
	// ParkAfter parks a rollout suspended this long (append shape, or a shape whose Sink is a
	// ParkableSink: the public WebSocket shape; with a Model that can park, sampler.Unparker):
	// its goroutine ends and the registry keeps its state as one value; the next append (or
	// hot continuation), cancel or drain continues it (sampler.Unpark), hot. The suspend timeout
	// still ends it. 0 means rollouts stay live while suspended.
	ParkAfter time.Duration
	// ParkUnstored lets store:false Responses be parked to the store too (Options.Reattach, and
	// the public-shape WebSocket clients of a server on a shared store), when they park and on
	// drain (-park-unstored): it then persists what the client asked not to store, for at most
	// the suspend timeout, deleted when it is claimed (resumed) or expires.
	ParkUnstored bool
	// QueueDepth bounds the creates/appends waiting behind the sampling rollout of each lane.
	// 0 means 16.
	QueueDepth int
	// MaxInflight bounds the lanes (stream_id) that sample at once on this
	// connection; a lane's turn past it waits, in its lane's queue, for one to finish.
	// 0 means 16; negative means no bound.
	MaxInflight int
	// MaxLanes bounds the distinct named lanes a connection may use over its life (the default
	// lane is not counted; a name is never freed): a create naming one more is answered
	// websocket_stream_limit_reached (400). 0 means 32; negative means no bound.
	MaxLanes int
	// CacheResponses and CacheBytes bound the connection's one registry, keyed by response id
	// (entries, bytes of items and settings). 0 means 128 and 64 MiB. CacheResponses counts
	// the Responses the connection keeps for previous_response_id: every append-shape
	// rollout, live or ended, and every ended Response a shape keeps (Conn.KeepResponse: the
	// public shape's segments, one entry each; their rollouts are reached through them and
	// not counted). CacheBytes counts every entry's bytes, live rollouts' too (held in
	// Options.Budget). Past either bound the least recently used ended entry of either kind
	// is evicted; live rollouts never are, nor the connection's newest entry (the Response
	// that just ended), which may keep the registry one entry over its bound until the next
	// (only making room for live rollouts' bytes, Options.Budget, may take it).
	CacheResponses int
	CacheBytes     int64
	// ShutdownGrace is how long sampling rollouts may finish when the connection drains.
	// 0 means 30 seconds; negative means no grace (they are ended at once).
	ShutdownGrace time.Duration
	// PingInterval sends a protocol ping this often; a peer that does not answer within the
	// interval is dropped and its rollouts freed. 0 means no pings.
	PingInterval time.Duration
	// WriteTimeout bounds the writing of one frame: a client that stops reading cannot pin a
	// rollout (and the memory it holds) for longer. When it expires the connection is closed
	// at once (the client sees 1006: no close frame can be written to a peer that does not
	// read). 0 means 30 seconds; negative means none.
	WriteTimeout time.Duration
	// KeepAlive is the longest silence a client sees while a response samples: after it, the
	// sampling response gets an application-level keepalive frame (a repeated
	// response.in_progress, see docs/append-protocol.md, Server events), on WebSocket and SSE,
	// because real clients (the Codex CLI's stream_idle_timeout) and proxies count only
	// messages, not protocol pings. 0 means DefaultKeepAlive (5 seconds); negative means none.
	KeepAlive time.Duration
	// MaxSuspended bounds the rollouts of this connection that are suspended or running at
	// once; MaxSuspendedTotal bounds the suspended rollouts of every connection sharing
	// Options.Metrics. Over either, a create is answered rollout_limit_reached (429). 0 means
	// no limit.
	MaxSuspended      int
	MaxSuspendedTotal int64
	// MaxRolloutBytes bounds the memory of one rollout, accounted as the bytes of its items
	// (history, inputs and outputs; its token buffer takes about as much again). A create or
	// append that would exceed it is answered rollout_too_large (400) and changes nothing.
	// 0 means no limit.
	MaxRolloutBytes int64
}

// Options configures a connection. The zero value works: each field's default is given.
type Options struct {
	// Limits are the tunables a server sets for all of its connections.
	Limits
	// Model serves every rollout. Required.
	Model sampler.Model
	// Store keeps stored responses: it resolves a previous_response_id that is
	// not in the shape's registry on the connection (Store.Chain), and every store:true
	// response of either shape that ends completed or incomplete is written to it (Store.Put,
	// Conn.Persist, counted against QuotaKey) before its terminal event is sent. Nil means none. Calls run with the connection's context: wrap the store with
	// store.Guard for a timeout (the server does, -store-timeout).
	Store store.Store
	// Owner is the API key of the connection ("" when the server is open): the scope of its
	// stored responses.
	Owner string
	// Logger receives the connection's logs. Nil means slog.Default().
	Logger *slog.Logger
	// Metrics, shared by a server's connections, counts rollouts, frames, errors and turn
	// times. Nil counts nothing.
	Metrics *Metrics
	// Admission, shared by a server's connections, bounds the sampling steps running at once
	// across all of them (-max-sampling). Nil means no bound.
	Admission *Admission
	// KeyRollouts, shared by a server's connections, bounds the live rollouts (queued,
	// sampling or suspended) of each quota key; QuotaKey is this connection's key
	// (QuotaKey). Over it a create is answered quota_exceeded (429). Nil means no limit.
	KeyRollouts *KeyLimit
	QuotaKey    string
	// LiveItems, shared by a server's connections, indexes the items of their live
	// append-shape rollouts of store:true Responses, so that an item_reference of any
	// connection or request of the same Owner finds them before the rollout ends and is
	// stored (Conn.Items). Nil means they are found on their own connection only until then.
	LiveItems *LiveItems
	// Budget, shared by a server's connections, counts the bytes every registry holds (items
	// and settings of live and ended rollouts); a create or append that does not fit gets
	// server_overloaded (503). The connection's own registry holds at most the larger of
	// CacheBytes and MaxRolloutBytes: ended rollouts are evicted to make room, and when live
	// ones alone hold that much a create or append gets rollout_limit_reached (429). Nil
	// means no server-wide bound.
	Budget *Budget
	// Parker is the store shared by the instances of a deployment that keeps parked rollouts
	// (store.ParkerOf of a shared Store, under its timeout). An append or cancel naming a
	// Response that is not on its connection claims it from there (its Owner's only) and
	// continues it on this connection, hot. The rollouts of a shape whose Sink is a
	// SharedParkSink (the public WebSocket shape) go there too, without Reattach: when they
	// park (ParkAfter) and on a drain for server shutdown, store:true ones (store:false too
	// with ParkUnstored), and the shape claims them (ClaimParked). Nil means none.
	Parker store.Parker
	// Reattach: the client opted into reattachment (docs/append-protocol.md, Reattaching).
	// With a Parker, a drain for server shutdown then parks the connection's suspended
	// append-shape rollouts of store:true Responses to it instead of ending them: each gets a
	// last event EventParked, and lives in the store for the rest of its suspend timeout (a
	// rollout without one is ended as before). Such a rollout is also written to the Parker
	// when it parks (ParkAfter), so that it survives the loss of this connection or instance:
	// one store write per park, the value expiring at its suspend timeout; it is claimed back
	// (deleted) when it continues on this connection, and a connection that closes leaves it
	// there.
	Reattach bool
	// Compaction signs and opens compaction items (POST /v1/responses/compact; a create's
	// compaction items are expanded with it). Nil means a random per-process key, so items
	// from another process (another instance, or before a restart) are invalid_compaction_item.
	Compaction *Compactor
	// InProgress, if set, reports whether response id of owner is running, or queued, outside
	// the connection (a background response, on this instance or another one sharing the
	// store): a create of either shape whose previous_response_id names it, and which neither
	// the connection nor Store holds, is answered response_in_progress (409, param
	// previous_response_id: ParentRunning) rather than previous_response_not_found, as the
	// HTTP create is. It is asked only then, with the connection's context. Nil means none.
	InProgress func(ctx context.Context, id, owner string) bool
}

func (o *Options) withDefaults() Options {
	r := *o
	if r.SuspendTimeout == 0 {
		r.SuspendTimeout = DefaultSuspendTimeout
	}
	if r.SuspendTimeout < 0 {
		r.SuspendTimeout = 0
	}
	if r.QueueDepth <= 0 {
		r.QueueDepth = DefaultQueueDepth
	}
	if r.CacheResponses <= 0 {
		r.CacheResponses = DefaultCacheResponses
	}
	if r.CacheBytes <= 0 {
		r.CacheBytes = DefaultCacheBytes
	}
	if r.ShutdownGrace == 0 {
		r.ShutdownGrace = DefaultShutdownGrace
	}
	if r.ShutdownGrace < 0 {
		r.ShutdownGrace = 0
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	if r.WriteTimeout == 0 {
		r.WriteTimeout = DefaultWriteTimeout
	}
	if r.KeepAlive == 0 {
		r.KeepAlive = DefaultKeepAlive
	}
	if r.MaxInflight == 0 {
		r.MaxInflight = DefaultMaxInflight
	}
	if r.MaxLanes == 0 {
		r.MaxLanes = DefaultMaxLanes
	}
	return r
}

// Conn is the shape-neutral connection core: it starts, resumes and cancels
// rollouts, schedules them FIFO so that one samples at a time, keeps a bounded registry of
// rollouts and their items under opaque keys, and drains on shutdown or at the age limit. The
// shape adapters (the append adapter in this package, the public one in compat) read frames,
// call Conn, and turn sampler.Sink calls into wire events.
type Conn struct {
	// Immutable
	id       string // "conn_…", the connection's id for backends (sampler.RolloutInfo.ConnID)
	opts     Options
	tr       Transport
	log      *slog.Logger
	ctx      context.Context // cancelled when the connection ends: every rollout stops
	cancel   context.CancelFunc
	inflight *inflight     // Limits.MaxInflight, shared by the lanes' gates; nil: no bound
	closed   chan struct{} // closed by Close
	opened   time.Time     // when NewConn returned (Snapshot)

	mu         sync.Mutex // guards reg, held, count, ended, newest, orphans, lanes, stamp, draining, drainWhy, closing, graceEnded, unparkSink
	reg        map[string]*rollout
	held       int64               // the bytes of reg's rollouts and of the kept Responses (held.go)
	count      int                 // the entries Limits.CacheResponses bounds (kept.go)
	ended      *Recent[endedEntry] // the ended rollouts of reg and the kept Responses, least recently used first: evicted from here
	newest     string              // the key of the entry last put in ended: never evicted
	orphans    []orphan            // rollouts whose latest Response left the registry: cancelOrphans ends them
	lanes      map[string]*gate    // by stream_id; "" is the default lane
	stamp      uint64
	draining   bool
	drainWhy   string
	closing    bool
	graceEnded bool          // EndGrace was called
	changed    chan struct{} // signalled (non-blocking) when a rollout suspends or ends
	nextExpiry time.Time     // the earliest suspend deadline of a parked rollout; zero: none
	unparkSink UnparkSink    // SetUnparkSink: continues a parked rollout of the shape's ParkableSink
	parker     store.Parker  // Options.Parker

	goroutines sync.WaitGroup // every goroutine the connection starts: one per rollout (Run), the age limit, the pinger, the watchdog, a keepalive writer

	wmu        writeLock    // serialises Write in arrival order (fair between lanes)
	out        outbox       // the frames Write queued, written by one flusher goroutine at a time
	writeStart atomic.Int64 // unix nanoseconds when the flusher's write in progress began; 0 when none

	framesSent, bytesSent atomic.Int64           // not yet added to Options.Metrics (flushCounts)
	written               atomic.Int64           // bytes of frames written to the transport (ping: the peer reads)
	pongMark              atomic.Int64           // written when the last answered ping was sent (ping)
	qmu                   sync.Mutex             // guards queued and qreserved
	queued                int64                  // bytes of the frames in Write (waiting or being written)
	qreserved             int64                  // bytes of Options.Budget held for them: whole writeGranules, at least queued
	watchdogOn            bool                   // immutable: the watchdog runs (and calls trimQueue)
	dropReason            atomic.Pointer[string] // why dropPeer dropped the peer (DropReason); nil until then
	keeping               atomic.Bool            // a keepalive writer is in progress (keepAlive)
	keepWriters           atomic.Int64           // keepalive writers started (keepAlive): one per keepalive due, not per tick
}

// NewConn returns the core of one connection over tr. Call Close when the adapter's read loop
// ends; Close cancels every rollout and waits for their goroutines.
func NewConn(tr Transport, opts Options) *Conn {
	o := opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{
		id:       protocol.NewID("conn"),
		opts:     o,
		tr:       tr,
		log:      o.Logger,
		ctx:      ctx,
		cancel:   cancel,
		inflight: inflightBound(o.MaxInflight),
		closed:   make(chan struct{}),
		lanes:    make(map[string]*gate),
		reg:      make(map[string]*rollout),
		ended:    NewRecent[endedEntry](),
		changed:  make(chan struct{}, 1),
		opened:   time.Now(),
	}
	c.out.space = make(chan struct{}, 1)
	c.parker = o.Parker
	o.Budget.join(c)
	if o.MaxConnectionAge > 0 {
		c.goroutines.Add(1)
		go c.ageLimit(o.MaxConnectionAge)
	}
	if o.WriteTimeout > 0 || o.KeepAlive > 0 || o.ParkAfter > 0 {
		c.watchdogOn = true
		c.goroutines.Add(1)
		go c.watchdog(o.WriteTimeout, o.KeepAlive)
	}
	if p, ok := tr.(Pinger); ok && o.PingInterval > 0 {
		c.goroutines.Add(1)
		go c.pinger(p, o.PingInterval)
	}
	return c
}

// laneLocked returns the gate of the lane streamID ("" for the default lane), creating it on
// first use; websocket_stream_limit_reached (400) when that would exceed Limits.MaxLanes named
// lanes.
func (c *Conn) laneLocked(streamID string) (*gate, error) {
	if g, ok := c.lanes[streamID]; ok {
		return g, nil
	}
	named := len(c.lanes)
	if _, ok := c.lanes[""]; ok {
		named--
	}
	if streamID != "" && c.opts.MaxLanes > 0 && named >= c.opts.MaxLanes {
		return nil, protocol.StreamLimitError(c.opts.MaxLanes, streamID)
	}
	g := newGate(c.opts.QueueDepth, c.opts.Admission)
	g.inflight = c.inflight
	c.lanes[streamID] = g
	return g, nil
}

// inflightBound is the bound of Limits.MaxInflight; nil (no bound) when it is negative.
func inflightBound(n int) *inflight {
	if n < 0 {
		return nil
	}
	return newInflight(n)
}

// Pinger is implemented by transports that can send a protocol ping and wait for its pong.
type Pinger interface {
	Ping(ctx context.Context) error
}

// pinger pings the peer every interval and drops it when it neither answers a ping nor reads
// for a whole interval (ping).
func (c *Conn) pinger(p Pinger, interval time.Duration) {
	defer c.goroutines.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		if !c.ping(p, interval) {
			c.dropPeer("no pong within " + interval.String() + " and the time to read what was sent at 64 KiB/s")
			return
		}
	}
}

// minReadRate is the slowest reading a peer's late pong is forgiven at (ping): 64 KiB/s.
const minReadRate = 64 << 10

// maxPongBacklog bounds the time ping gives a peer to read what was sent before its ping when
// Options.WriteTimeout does not (as long as one write may take).
const maxPongBacklog = 30 * time.Second

// ping sends one ping and waits for its pong, and reports whether the peer is alive. A peer
// answers a ping only once it has read what was sent before it, so a peer reading a long answer
// slowly answers late. Its pong is waited for while writes to it make progress (each interval
// that some were written), and beyond that for as long as reading what was written since its
// last pong takes at minReadRate, at most Options.WriteTimeout (maxPongBacklog without one). A peer that neither answers nor reads in that time is not
// alive. The ping's write and wait run in one goroutine that ends before ping returns.
func (c *Conn) ping(p Pinger, interval time.Duration) bool {
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Ping(ctx) }()
	start, sent := time.Now(), c.written.Load() // the pong says the peer has read sent bytes
	backlog := min(time.Duration(float64(sent-c.pongMark.Load())/minReadRate*float64(time.Second)),
		cmp.Or(max(c.opts.WriteTimeout, 0), maxPongBacklog))
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		mark := c.written.Load()
		select {
		case err := <-done:
			if err == nil {
				c.pongMark.Store(sent)
			}
			return err == nil || c.ctx.Err() != nil
		case <-t.C:
			if c.written.Load() == mark && time.Since(start) >= interval+backlog {
				cancel()
				<-done
				return c.ctx.Err() != nil // a connection that is ending is not dropped
			}
			t.Reset(interval)
		}
	}
}

// watchdog is the connection's one timer goroutine. It drops the peer when one write has been
// in progress longer than writeTimeout (a client that stops reading fills the socket buffers
// and would otherwise pin the writing rollout, and the memory it holds, for ever), and sends
// keepalives (keepAlive), and ends parked rollouts whose suspend timeout has passed. It checks
// every quarter of the shortest of the two and, when rollouts park, the suspend timeout.
func (c *Conn) watchdog(writeTimeout, keepAlive time.Duration) {
	defer c.goroutines.Done()
	tick := time.Duration(1<<63 - 1)
	expiry := time.Duration(0)
	if c.opts.ParkAfter > 0 {
		expiry = c.opts.SuspendTimeout
	}
	for _, d := range []time.Duration{writeTimeout, keepAlive, expiry} {
		if d > 0 {
			tick = min(tick, max(d/4, time.Millisecond))
		}
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	var sampling []*sampler.Rollout // keepAlive's scratch
	for {
		select {
		case <-c.ctx.Done():
			return
		case now := <-t.C:
			c.flushCounts()
			c.trimQueue()
			if start := c.writeStart.Load(); writeTimeout > 0 && start != 0 && now.Sub(time.Unix(0, start)) > writeTimeout {
				c.dropPeer("write timeout: the client is not reading")
				return
			}
			if keepAlive > 0 {
				sampling = c.keepAlive(now, keepAlive, sampling)
			}
			if expiry > 0 {
				c.expireParked(now)
			}
		}
	}
}

// dropPeer closes the transport of a peer that stopped answering or reading; the adapter's
// read loop then ends and Close frees every rollout. The write watchdog and the ping loop
// may both find the same peer: only the first drops, counts and logs it.
func (c *Conn) dropPeer(why string) {
	if !c.dropReason.CompareAndSwap(nil, &why) {
		return
	}
	if m := c.opts.Metrics; m != nil {
		m.PeersDropped.Add(1)
	}
	c.log.Info("dropping peer", "reason", why)
	_ = c.tr.Abort()
}

// DropReason returns why the server dropped the peer (it stopped reading, or answering
// pings: "write timeout: the client is not reading"), or "" when it did not. The transport's
// read error after a drop says only that the connection was closed.
func (c *Conn) DropReason() string {
	if why := c.dropReason.Load(); why != nil {
		return *why
	}
	return ""
}

func (c *Conn) ageLimit(age time.Duration) {
	defer c.goroutines.Done()
	t := time.NewTimer(age)
	defer t.Stop()
	select {
	case <-t.C:
		c.Drain(protocol.ReasonConnectionLimit)
	case <-c.ctx.Done():
	}
}

// Transport is the connection's transport (the adapters read frames from it).
func (c *Conn) Transport() Transport { return c.tr }

// MaxFrame is the largest client frame in bytes (Limits.MaxFrame with its default).
func (c *Conn) MaxFrame() int64 { return c.opts.maxFrame() }

// Context is cancelled when the connection ends.
func (c *Conn) Context() context.Context { return c.ctx }

// Write queues one frame for the connection's flusher and returns; frames leave in the
// order Write was called, a burst of them in one write to the network (outbox.go). Write
// does not retain frame. It waits while the connection has maxOutbox bytes queued, and until
// a frame of largeFrame bytes or more is written. It returns the transport's error once the
// peer is gone (the error of an earlier frame's write: a write fails after Write returned).
// A write that does not finish within Limits.WriteTimeout drops the peer. (Timing a write
// with a per-frame context would cost an allocation and a timer per event; the write
// watchdog checks the one write in progress instead.) Flush waits for the queued frames.
//
// While a frame waits for its turn or is being written, its bytes are counted in
// Options.Budget (the frame is in memory until the peer reads it). A frame that does not fit
// there is still written unless the connection has maxOutbox bytes queued already (the peer
// is keeping up, and one frame is bounded by what produced it); with that much queued the peer
// is falling behind while the server is out of memory: it is dropped, as one that exceeds the
// write timeout is, and Write returns ErrWriteBacklog.
func (c *Conn) Write(frame []byte) error { return c.write(frame, false) }

// WriteLast is Write for the last frame of a burst (the event that ends a turn: response.done,
// a terminal event), after which the writer waits for its client: when no flush is in progress
// the frames queued so far are written at once by the calling goroutine, without waking the
// flusher (a hand-off on the turn's critical path). Errors are Write's.
func (c *Conn) WriteLast(frame []byte) error { return c.write(frame, true) }

// WriteEvent writes the encoded event frame of type t: with WriteLast when t ends a turn
// (protocol.EventType.EndsTurn), else with Write.
func (c *Conn) WriteEvent(frame []byte, t protocol.EventType) error {
	return c.write(frame, t.EndsTurn())
}

func (c *Conn) write(frame []byte, last bool) error {
	if !c.queue(int64(len(frame))) {
		return ErrWriteBacklog
	}
	c.wmu.Lock()
	err := c.enqueue(frame, last)
	c.wmu.Unlock()
	return err
}

// ErrWriteBacklog is returned by Conn.Write when the connection was dropped because its
// queued frames did not fit in the server-wide Budget.
var ErrWriteBacklog = errors.New("session: the peer was dropped: its queued frames exceed the server's memory budget")

// writeGranule is the unit in which a connection reserves Budget for its queued frames: a
// connection streaming small events touches the server-wide counter only when its queue
// crosses a granule, and keeps one granule while it writes (released by the watchdog once
// the queue has stayed empty for a tick, and by Close).
const writeGranule = 64 << 10

// granules rounds n up to whole writeGranules.
func granules(n int64) int64 { return (n + writeGranule - 1) / writeGranule * writeGranule }

// queue counts n bytes about to be queued for writing in Options.Budget (see Write); false
// when the peer has been dropped instead.
func (c *Conn) queue(n int64) bool {
	c.qmu.Lock()
	behind := c.queued >= maxOutbox // a burst of events is queued for a moment: not behind
	c.queued += n
	if c.queued <= c.qreserved {
		c.qmu.Unlock()
		return true
	}
	need := granules(c.queued) - c.qreserved
	if c.opts.Budget.reserve(need, !behind) {
		c.qreserved += need
		c.qmu.Unlock()
		return true
	}
	c.queued -= n
	c.qmu.Unlock()
	c.dropPeer("queued frames exceed the memory budget: the client is not reading")
	return false
}

// unqueue takes n written (or failed) bytes off the queue and returns the reservation beyond
// the granules the queue still needs, keeping one granule while the connection is open and
// its watchdog runs and the peer has not been dropped (trimQueue returns that one).
func (c *Conn) unqueue(n int64) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	c.queued -= n
	keep := granules(c.queued)
	if c.watchdogOn && c.ctx.Err() == nil && c.dropReason.Load() == nil {
		keep = max(keep, min(c.qreserved, writeGranule))
	}
	if c.qreserved > keep {
		c.opts.Budget.Release(c.qreserved - keep)
		c.qreserved = keep
	}
}

// trimQueue returns the reservation of an empty queue (the watchdog, every tick, and Close).
func (c *Conn) trimQueue() {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.queued == 0 && c.qreserved > 0 {
		c.opts.Budget.Release(c.qreserved)
		c.qreserved = 0
	}
}

// flushFrames is how many frames a connection counts on its own before adding them to the
// server's Metrics: a counter shared by every connection, written on every frame, would make
// the cores contend for its cache line.
const flushFrames = 64

// flushCounts adds the frames and bytes counted since the last flush to Options.Metrics (on
// every flushFrames-th frame, at every watchdog tick and at Close).
func (c *Conn) flushCounts() {
	f, b := c.framesSent.Swap(0), c.bytesSent.Swap(0)
	if m := c.opts.Metrics; m != nil && f|b != 0 {
		m.Frames.Add(f)
		m.Bytes.Add(b)
	}
}

// WriteError sends the error envelope for err: its *protocol.Error payload
// (protocol.ErrorOf; server_error for any other error). The connection stays open, also for a
// *protocol.ConnectionError: CloseWith sends its envelope and closes. A nil err sends nothing.
func (c *Conn) WriteError(err error) error {
	if err == nil {
		return nil
	}
	e := protocol.ErrorOf(err)
	c.opts.Metrics.error(e.Code)
	return c.Write(protocol.AppendError(nil, e))
}

// Close ends the connection at once (client disconnect semantics): every rollout stops without
// further events, their goroutines are waited for and the registry is dropped, with what its
// rollouts held outside it (Options.Budget, Options.LiveItems, Options.KeyRollouts). Idempotent.
func (c *Conn) Close() {
	c.mu.Lock()
	already := c.closing
	c.closing = true
	if !already {
		c.unparkAllLocked() // they end with the connection's context, as live ones
	}
	c.mu.Unlock()
	if already {
		<-c.closed
		return
	}
	c.opts.Budget.leave(c)
	c.cancel()
	c.goroutines.Wait()
	c.waitOutbox()
	c.flushCounts()
	c.trimQueue()
	c.mu.Lock()
	c.releaseLeftLocked()
	c.opts.Budget.Release(c.heldLocked())
	c.reg, c.held, c.count, c.orphans = nil, 0, 0, nil
	c.ended = NewRecent[endedEntry]()
	c.mu.Unlock()
	close(c.closed)
}

// Done is closed once Close has finished.
func (c *Conn) Done() <-chan struct{} { return c.closed }

func (c *Conn) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// Drain ends the connection gracefully (see sampler.Ending): new creates are
// refused, suspended and queued rollouts end at once with reason (incomplete), sampling ones
// may finish within Limits.ShutdownGrace and are then ended with reason too; for the age limit
// (reason connection_limit) the websocket_connection_limit_reached error frame follows; then
// the connection closes with 1001. Drain returns when the close frame has been sent. Safe to
// call more than once and concurrently; later calls wait for the first.
func (c *Conn) Drain(reason string) {
	c.mu.Lock()
	if c.draining || c.closing {
		c.mu.Unlock()
		return
	}
	c.draining = true
	c.drainWhy = reason
	c.mu.Unlock()

	grace := time.NewTimer(c.opts.ShutdownGrace)
	defer grace.Stop()
	graceOver, dropped := false, false
	var flush *time.Timer // from the end of the grace: drainFlush
	for {
		c.mu.Lock()
		graceOver = graceOver || c.graceEnded
		c.mu.Unlock()
		live := c.cancelIdle(reason, graceOver)
		if live == 0 {
			break
		}
		var flushed <-chan time.Time
		if graceOver && !dropped {
			if flush == nil {
				flush = time.NewTimer(drainFlush)
				defer flush.Stop()
			}
			flushed = flush.C
		}
		select {
		case <-c.changed:
		case <-grace.C:
			graceOver = true
		case <-flushed:
			dropped = true
			c.dropPeer(notReading)
		case <-c.ctx.Done():
			return
		}
	}
	c.waitRolloutsOrDrop(drainFlush)
	if reason == protocol.ReasonConnectionLimit {
		_ = c.CloseWith(&protocol.ConnectionError{Err: connectionLimitError(c.opts.MaxConnectionAge),
			Code: protocol.CloseGoingAway, Reason: "connection age limit reached"})
		return
	}
	_ = c.Flush()
	_ = c.tr.Close(protocol.CloseGoingAway, "server shutting down")
}

// CloseWith ends the connection for the connection-fatal error e: it sends e.Err's error
// envelope (none when nil), then closes the transport with e.Code and e.Reason. The caller's
// read loop then ends; Close still has to be called.
func (c *Conn) CloseWith(e *protocol.ConnectionError) error {
	if e.Err != nil {
		_ = c.WriteError(e.Err)
	}
	_ = c.Flush()
	return c.tr.Close(e.Code, e.Reason)
}

// ConnectionLimitError is the websocket_connection_limit_reached error of this connection's
// age limit: sent before the close with 1001, and to creates queued then.
func (c *Conn) ConnectionLimitError() *protocol.Error {
	return connectionLimitError(c.opts.MaxConnectionAge)
}

func connectionLimitError(age time.Duration) *protocol.Error {
	return protocol.Errorf(http.StatusBadRequest, protocol.CodeConnectionLimit, "",
		"Responses websocket connection limit reached (%s). Create a new websocket connection to continue.", humanDuration(age))
}

func humanDuration(d time.Duration) string {
	if d > 0 && d%time.Minute == 0 {
		return strconv.Itoa(int(d/time.Minute)) + " minutes"
	}
	return d.String()
}

// cancelIdle cancels every rollout that is not sampling (or every rollout once the grace period
// is over) and reports how many rollouts are still live.
func (c *Conn) cancelIdle(reason string, all bool) int {
	c.mu.Lock()
	var stop []*sampler.Rollout
	var parked []*rollout
	live := 0
	var moves []*rollout
	for _, r := range c.reg {
		if r.final {
			continue
		}
		if move, handled := c.parkToStoreLocked(r, reason, all); handled {
			live++
			if move {
				moves = append(moves, r)
			}
			continue
		}
		if r.parked != nil {
			live++
			if !r.cancelled {
				r.cancelled, r.cancelWhy = true, reason
				parked = append(parked, r)
			}
			continue
		}
		state := r.r.State()
		if state == sampler.Ended {
			continue
		}
		live++
		if all || state != sampler.Sampling {
			if !r.cancelled {
				r.cancelled, r.cancelWhy = true, reason // a rollout parking now is cancelled once parked
				stop = append(stop, r.r)
			}
		}
	}
	for _, h := range parked {
		if r, err := c.unparkLocked(h, false, nil); err == nil {
			stop = append(stop, r)
		}
	}
	c.mu.Unlock()
	for _, r := range stop {
		r.Cancel(reason)
	}
	for _, h := range moves {
		c.moveToStore(h, reason)
	}
	return live
}

// liveRollouts returns the rollouts of the registry that hold a goroutine.
func (c *Conn) liveRollouts() []*sampler.Rollout {
	c.mu.Lock()
	defer c.mu.Unlock()
	var rs []*sampler.Rollout
	for _, r := range c.reg {
		if r.r != nil {
			rs = append(rs, r.r)
		}
	}
	return rs
}

// drainFlush bounds how long a drain, once every rollout has been told to end, waits for them
// to write their last events: a client that does not read them by then (its writes are stuck
// behind a full socket) is dropped, so a shutdown is bounded by -shutdown-grace plus this,
// not by -write-timeout.
const drainFlush = 5 * time.Second

// notReading is why a drain drops a peer after drainFlush.
const notReading = "it did not read its last events within 5s of the end of the shutdown grace"

// waitRolloutsOrDrop waits for the live rollouts to end; after d it drops the peer (their
// writes then fail at once) and waits for the rest.
func (c *Conn) waitRolloutsOrDrop(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	rs := c.liveRollouts()
	for _, r := range rs {
		select {
		case <-r.Done():
		case <-t.C:
			c.dropPeer(notReading)
			for _, r := range rs {
				r.Wait()
			}
			return
		}
	}
}

// EndGrace ends the shutdown grace at once: a draining connection ends its sampling rollouts
// like at the end of Limits.ShutdownGrace (each still gets its terminal event), and a later
// Drain does not wait. For a second shutdown signal. Safe to call more than once.
func (c *Conn) EndGrace() {
	c.mu.Lock()
	c.graceEnded = true
	c.mu.Unlock()
	c.signal()
}

// Draining reports whether the connection is draining, and why.
func (c *Conn) Draining() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.draining, c.drainWhy
}

func (o *Options) maxFrame() int64 {
	if o.MaxFrame > 0 {
		return o.MaxFrame
	}
	return DefaultMaxFrame
}
