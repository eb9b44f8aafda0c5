package chat

import (
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
)

// failureCounts counts upstream failures by replica and kind.
type failureCounts struct {
	mu sync.Mutex
	n  map[[2]string]int64 // {replica, kind} → count
}

// failure logs one upstream failure (its replica, kind and error; never content or keys) and
// counts it.
func (m *Model) failure(e *engine, kind string, err error) {
	m.fails.mu.Lock()
	if m.fails.n == nil {
		m.fails.n = map[[2]string]int64{}
	}
	m.fails.n[[2]string{e.base, kind}]++
	m.fails.mu.Unlock()
	m.logf("upstream step failed", "replica", e.base, "kind", kind, "err", err)
}

// kindOf names the kind of a request error: refused, reset, eof, timeout or other.
func kindOf(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case strings.Contains(err.Error(), "EOF"):
		return "eof"
	case strings.Contains(err.Error(), "sent nothing for"), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "other"
}

var (
	descFailures = prometheus.NewDesc("tether_upstream_failures_total",
		"Upstream steps that failed, by replica and kind (refused, reset, eof, timeout, http_NNN, malformed, stream_error, no_finish, not_stream, other).",
		[]string{"replica", "kind"}, nil)
	descSteps = prometheus.NewDesc("tether_upstream_steps_total", "Sampling steps sent to each upstream replica.", []string{"replica"}, nil)
	descCold  = prometheus.NewDesc("tether_upstream_moved_total",
		"Rollouts moved to this replica after theirs failed (their next step is prefilled again).", []string{"replica"}, nil)
	descInput  = prometheus.NewDesc("tether_upstream_input_tokens_total", "Prompt tokens the replica reported.", []string{"replica"}, nil)
	descCached = prometheus.NewDesc("tether_upstream_cached_tokens_total", "Prompt tokens the replica reported reused from its cache.", []string{"replica"}, nil)
	descUp     = prometheus.NewDesc("tether_upstream_up", "1 while the replica is in placement, 0 while it backs off after a failure.", []string{"replica"}, nil)
	descSlots  = prometheus.NewDesc("tether_upstream_slots_pinned", "Engine slots held by open rollouts (sampling or suspended).", []string{"replica"}, nil)
	descKV     = prometheus.NewDesc("tether_upstream_kv_total",
		"Slot KV of suspended rollouts handed on: saved to a file, restored from one, dropped (no save possible, or its file was dropped), or kept in a file for a parked rollout (park).", []string{"replica", "op"}, nil)
	descSwept = prometheus.NewDesc("tether_upstream_slot_files_swept_total",
		"Stale slot files removed from the slot directory (older than the slot file TTL: left by an instance that exited, or never resumed).", nil, nil)
	descKVSec = prometheus.NewDesc("tether_upstream_kv_seconds_total", "Time spent saving and restoring slot KV.", []string{"replica", "op"}, nil)
)

// Describe implements prometheus.Collector.
func (m *Model) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descFailures, descSteps, descCold, descInput, descCached, descUp, descSlots, descKV, descKVSec, descSwept} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: per-replica steps, failures by kind, health, slots
// in use, reported prompt and cached tokens (their ratio is the cached fraction) and KV moves.
func (m *Model) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for _, e := range m.engines {
		counter(descSteps, e.total.Load(), e.base)
		counter(descCold, e.cold.Load(), e.base)
		counter(descInput, e.input.Load(), e.base)
		counter(descCached, e.cached.Load(), e.base)
		up := 1.0
		if e.isDown() {
			up = 0
		}
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, up, e.base)
		if p := e.slots; p != nil {
			ch <- prometheus.MustNewConstMetric(descSlots, prometheus.GaugeValue, float64(p.inUse()), e.base)
			counter(descKV, p.saves.Load(), e.base, "save")
			counter(descKV, p.restores.Load(), e.base, "restore")
			counter(descKV, p.drops.Load(), e.base, "drop")
			counter(descKV, p.parks.Load(), e.base, "park")
			ch <- prometheus.MustNewConstMetric(descKVSec, prometheus.CounterValue, float64(p.saveNanos.Load())/1e9, e.base, "save")
			ch <- prometheus.MustNewConstMetric(descKVSec, prometheus.CounterValue, float64(p.restoreNanos.Load())/1e9, e.base, "restore")
		}
	}
	if m.sweeper != nil {
		counter(descSwept, m.sweeper.removed.Load())
	}
	m.fails.mu.Lock()
	defer m.fails.mu.Unlock()
	for k, v := range m.fails.n {
		counter(descFailures, v, k[0], k[1])
	}
}
