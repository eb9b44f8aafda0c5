package session

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetherd/tether/sampler"
)

// TurnBuckets are the upper bounds, in seconds, of Metrics' per-turn server time histogram.
var TurnBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Metrics counts what a server's connections do (issue: operability). One Metrics is shared by
// every connection of a server through Options.Metrics; nil counts nothing. Safe for
// concurrent use; the gauges are current values, the rest only grow.
type Metrics struct {
	// Rollouts now, by state (gauges). Suspended rollouts are live (a goroutine waits) or
	// parked (Limits.ParkAfter: the registry holds their state only).
	Queued, Sampling, Suspended, Parked atomic.Int64
	// Parks and Unparks count rollouts parked and continued from parked (counters);
	// PressureParks counts those of Parks that memory pressure parked (Budget: a create or
	// append that did not fit), ShutdownParks those a drain parked to move them to the store;
	// IdleParks those parked after Limits.ParkAfter.
	Parks, Unparks, PressureParks, ShutdownParks, IdleParks atomic.Int64
	// StoreParks counts rollouts a drain parked to the shared store (Options.Reattach, or a
	// SharedParkSink's), Claims those claimed from it by an append or cancel or a public
	// continuation (Conn.ClaimParked), or taken back by the connection that wrote them
	// (counters). StoreCopies counts the parked rollouts also written to the store
	// when they parked (Limits.ParkAfter), so that they survive their instance (counter).
	StoreParks, Claims, StoreCopies atomic.Int64
	// Connections now (gauge), by shape.
	AppendConns, PublicConns atomic.Int64
	// Frames and bytes written to clients (counters). Each connection adds its own counts
	// every 64 frames, at each tick of its watchdog (a quarter of the keepalive or write
	// timeout) and when it closes, so the totals may lag that much.
	Frames, Bytes atomic.Int64
	// Evictions of ended entries from connection registries past Limits.CacheResponses or
	// CacheBytes: ended rollouts (append shape) and kept Responses (the public shape's
	// segments) (counter).
	Evictions atomic.Int64
	// PeersDropped counts connections closed for a missed ping, a write timeout or queued
	// frames over the memory budget (counter).
	PeersDropped atomic.Int64

	mu       sync.Mutex // guards errors and the histogram
	errors   map[string]int64
	turnN    []int64 // per bucket (cumulative counts are computed on read), +Inf last
	turnSum  float64
	turnSeen int64
}

func (m *Metrics) error(code string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	if m.errors == nil {
		m.errors = make(map[string]int64)
	}
	m.errors[code]++
	m.mu.Unlock()
}

func (m *Metrics) observeTurn(d time.Duration) {
	if m == nil {
		return
	}
	s := d.Seconds()
	i := sort.SearchFloat64s(TurnBuckets, s)
	m.mu.Lock()
	if m.turnN == nil {
		m.turnN = make([]int64, len(TurnBuckets)+1)
	}
	m.turnN[i]++
	m.turnSum += s
	m.turnSeen++
	m.mu.Unlock()
}

// Errors returns the error frames sent so far, by code.
func (m *Metrics) Errors() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int64, len(m.errors))
	for k, v := range m.errors {
		out[k] = v
	}
	return out
}

// Turns returns the per-turn server time histogram: the number of turns, the sum of their
// times in seconds, and the cumulative count per bucket of TurnBuckets. A turn lasts from the
// moment the connection accepts a create or append until the rollout suspends or ends,
// queueing included.
func (m *Metrics) Turns() (count int64, sum float64, cumulative []int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cumulative = make([]int64, len(TurnBuckets))
	var run int64
	for i := range TurnBuckets {
		if m.turnN != nil {
			run += m.turnN[i]
		}
		cumulative[i] = run
	}
	return m.turnSeen, m.turnSum, cumulative
}

// gauge returns the gauge of a rollout state (nil for ended).
func (m *Metrics) gauge(s sampler.State) *atomic.Int64 {
	switch s {
	case sampler.Queued, sampler.Resuming:
		return &m.Queued
	case sampler.Sampling:
		return &m.Sampling
	case sampler.Suspended:
		return &m.Suspended
	case sampler.Parked:
		return &m.Parked
	}
	return nil
}

// CountError counts one error answered with code (tether_errors_total), for errors sent
// outside a Conn (HTTP answers). Safe on a nil Metrics.
func (m *Metrics) CountError(code string) { m.error(code) }
