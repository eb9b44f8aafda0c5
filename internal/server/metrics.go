package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
	"github.com/tetherd/tether/session/store"
)

// codePermissionDenied is the error code of a valid API key on a route it may not use
// (GET /metrics without the metrics key).
const codePermissionDenied = "permission_denied"

// metricsRoute serves GET /metrics on the main listener to whom Options.MetricsKeys and
// Options.MetricsOwnListener let in; see Options.MetricsKeys.
func (s *Server) metricsRoute(w http.ResponseWriter, r *http.Request) {
	if s.opts.MetricsKeys.Open() && !s.opts.MetricsOwnListener && s.opts.Keys.Open() {
		s.metricsHTTP.ServeHTTP(w, r) // an open server: no client is told apart from another
		return
	}
	s.metricsAuth(w, r)
}

// metricsAuth serves /metrics to a request with a metrics key: 401 without a valid key of
// either kind, 403 permission_denied to an API key, and to everyone when no metrics key is
// configured.
func (s *Server) metricsAuth(w http.ResponseWriter, r *http.Request) {
	if !s.opts.MetricsKeys.Open() {
		if _, ok := s.opts.MetricsKeys.owner(r); ok {
			s.metricsHTTP.ServeHTTP(w, r)
			return
		}
	}
	_, apiKey := s.opts.Keys.owner(r)
	if !s.opts.Keys.Open() && !apiKey || s.opts.Keys.Open() && !s.opts.MetricsKeys.Open() {
		unauthorized(w, r)
		return
	}
	where := "the metrics key (-metrics-key-file)"
	if s.opts.MetricsOwnListener {
		where = "the metrics listener (-metrics-addr)"
		if !s.opts.MetricsKeys.Open() {
			where += " or the metrics key (-metrics-key-file)"
		}
	}
	s.fail(w, protocol.Errorf(http.StatusForbidden, codePermissionDenied, "",
		"GET /metrics is not served to API keys: a scraper reads it with %s.", where))
}

// MetricsHandler serves GET /metrics alone, for a listener of its own (tether serve
// -metrics-addr; see Options.MetricsOwnListener): to every request, or with
// Options.MetricsKeys only to a request that carries one (401 invalid_api_key otherwise).
// Any other route gets 404 not_found.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.opts.MetricsKeys.owner(r); !ok {
			unauthorized(w, r)
			return
		}
		s.metricsHTTP.ServeHTTP(w, r)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeHTTPError(w, protocol.Errorf(http.StatusNotFound, "not_found", "", "No route %s %s on the metrics listener: it serves GET /metrics.", r.Method, r.URL.Path))
	})
	return mux
}

// metricsHandler returns GET /metrics in the Prometheus text format: connections, rollouts by
// state, continuations by path, cold continuations by reason, frames and bytes sent, the
// per-turn server time histogram, errors by code, evictions, dropped peers, the store's size
// and the waits for heavy-work slots, plus the Go runtime's and the process's metrics.
func (s *Server) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &s.metrics
	gauge := func(name, help string, labels prometheus.Labels, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, f))
	}
	counter := func(name, help string, labels prometheus.Labels, f func() float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, f))
	}
	gauge("tether_connections", "Open WebSocket connections.", prometheus.Labels{"shape": "append"}, func() float64 { return float64(m.AppendConns.Load()) })
	gauge("tether_connections", "Open WebSocket connections.", prometheus.Labels{"shape": "public"}, func() float64 { return float64(m.PublicConns.Load()) })
	gauge("tether_rollouts", "Live rollouts by state.", prometheus.Labels{"state": "sampling"}, func() float64 { return float64(m.Sampling.Load()) })
	gauge("tether_rollouts", "Live rollouts by state.", prometheus.Labels{"state": "suspended"}, func() float64 { return float64(m.Suspended.Load()) })
	gauge("tether_rollouts", "Live rollouts by state.", prometheus.Labels{"state": "queued"}, func() float64 { return float64(m.Queued.Load()) })
	gauge("tether_rollouts", "Live rollouts by state.", prometheus.Labels{"state": "parked"}, func() float64 { return float64(m.Parked.Load()) })
	parksHelp := "Suspended rollouts parked (their goroutine ended, their state kept as one value), by reason: idle (-park-after), pressure (a create or append did not fit in -max-memory), shutdown (a drain moving them to the shared store)."
	counter("tether_parks_total", parksHelp, prometheus.Labels{"reason": "idle"}, func() float64 { return float64(m.IdleParks.Load()) })
	counter("tether_parks_total", parksHelp, prometheus.Labels{"reason": "pressure"}, func() float64 { return float64(m.PressureParks.Load()) })
	counter("tether_parks_total", parksHelp, prometheus.Labels{"reason": "shutdown"}, func() float64 { return float64(m.ShutdownParks.Load()) })
	counter("tether_unparks_total", "Parked rollouts continued (an append, cancel, drain or their suspend timeout).", nil, func() float64 { return float64(m.Unparks.Load()) })
	counter("tether_store_parks_total", "Suspended rollouts of reattaching clients parked to the shared store, by when: shutdown (a drain) or parked (when they parked, -park-after), so that they survive their instance; any instance resumes them.",
		prometheus.Labels{"when": "shutdown"}, func() float64 { return float64(m.StoreParks.Load()) })
	counter("tether_store_parks_total", "Suspended rollouts of reattaching clients parked to the shared store, by when: shutdown (a drain) or parked (when they parked, -park-after), so that they survive their instance; any instance resumes them.",
		prometheus.Labels{"when": "parked"}, func() float64 { return float64(m.StoreCopies.Load()) })
	counter("tether_claims_total", "Parked rollouts claimed from the shared store by an append or cancel on this instance (also those it had written there itself and took back to continue them).", nil, func() float64 { return float64(m.Claims.Load()) })
	c := &s.counters
	for path, v := range map[string]func() int64{"hot": c.Hot.Load, "cold": c.Cold.Load, "new": c.New.Load, "warmup": c.WarmUp.Load} {
		counter("tether_continuations_total", "Public-shape creates by path: hot (resumed), cold (rebuilt), new chain, warm-up.", prometheus.Labels{"path": path}, func() float64 { return float64(v()) })
	}
	for _, reason := range protocol.ColdReasons {
		counter("tether_cold_continuations_total", "Public-shape cold continuations by reason (their sum is tether_continuations_total{path=\"cold\"}): settings_differ, not_latest, not_suspended, not_on_connection, other_lane, warmup, input.",
			prometheus.Labels{"reason": reason}, func() float64 { return float64(c.ColdBy(reason)) })
	}
	counter("tether_ws_frames_sent_total", "WebSocket frames sent to clients.", nil, func() float64 { return float64(m.Frames.Load()) })
	counter("tether_ws_bytes_sent_total", "WebSocket payload bytes sent to clients.", nil, func() float64 { return float64(m.Bytes.Load()) })
	counter("tether_evictions_total", "Ended rollouts evicted from connection registries.", nil, func() float64 { return float64(m.Evictions.Load()) })
	counter("tether_peers_dropped_total", "Connections dropped for a missed pong, a write timeout or queued frames over the memory budget.", nil, func() float64 { return float64(m.PeersDropped.Load()) })
	if a := s.adm; a != nil {
		gauge("tether_sampling_max", "Server-wide bound on concurrent sampling steps (-max-sampling).", nil, func() float64 { return float64(a.Max()) })
		gauge("tether_sampling_admitted", "Rollouts sampling under the server-wide admission gate.", nil, func() float64 { return float64(a.Running.Load()) })
		gauge("tether_sampling_waiting", "Rollouts holding their connection's slot and waiting for the server-wide admission gate.", nil, func() float64 { return float64(a.Waiting.Load()) })
		counter("tether_sampling_wait_seconds_total", "Time rollouts spent waiting for the server-wide admission gate.", nil, func() float64 { return float64(a.WaitNanos.Load()) / 1e9 })
	}
	gauge("tether_chat_slots_waiting", "Chat completions waiting for a slot (-slots), those held back by their key's -key-share included.", nil, func() float64 { return float64(s.chat.Slots.Waiting()) })
	if ms, ok := s.opts.Store.(*store.Memory); ok {
		gauge("tether_store_responses", "Responses in the in-memory store.", nil, func() float64 { return float64(ms.Len()) })
		gauge("tether_store_bytes", "Estimated bytes of the responses in the in-memory store.", nil, func() float64 { return float64(ms.Bytes()) })
	}
	const evictionsHelp = "Stored responses this instance evicted: over their key's quota, over the store's bounds, or because Redis was at its maxmemory."
	if es, ok := s.opts.Store.(interface{ Evictions() (key, global int64) }); ok {
		for reason, i := range map[string]int{"key_quota": 0, "store_bound": 1} {
			counter("tether_store_evictions_total", evictionsHelp,
				prometheus.Labels{"reason": reason}, func() float64 { k, g := es.Evictions(); return float64([]int64{k, g}[i]) })
		}
	}
	if fs, ok := s.opts.Store.(interface{ FullEvictions() int64 }); ok {
		counter("tether_store_evictions_total", evictionsHelp, prometheus.Labels{"reason": "store_full"}, func() float64 { return float64(fs.FullEvictions()) })
	}
	b := s.budget
	gauge("tether_memory_budget_bytes", "Bytes of the -max-memory budget in use: frames and bodies being read and decoded, items, settings and model state held by rollouts, frames queued to WebSocket peers.", nil, func() float64 { return float64(b.InUse()) })
	for limit, v := range map[string]func() int64{"memory_budget": b.Rejected.Load, "key_rollouts": s.keyRoll.RejectedCount, "key_connections": s.keyConns.RejectedCount} {
		counter("tether_limit_rejections_total", "Requests and frames refused by a limit: the memory budget or decoding bound (server_overloaded), a per-key quota (quota_exceeded).",
			prometheus.Labels{"limit": limit}, func() float64 { return float64(v()) })
	}
	for limit, l := range map[string]*session.KeyLimit{"key_rollouts": s.keyRoll, "key_connections": s.keyConns} {
		gauge("tether_key_quota", "Per-key quotas: live rollouts (-key-rollouts) and WebSocket connections (-key-connections) each API key, or each client address on an open server, may hold; 0 means no quota.",
			prometheus.Labels{"limit": limit}, func() float64 { return float64(l.Max()) })
	}
	counter("tether_store_errors_total", "Store calls that failed or timed out (-store-timeout); each answered store_unavailable.", nil,
		func() float64 { return float64(s.store.Errors()) })
	reg.MustRegister(&sessionCollector{m: m, http: &s.httpErrors}, slotCollector{})
	if c, ok := s.opts.Model.(prometheus.Collector); ok { // a backend's own metrics (upstream replicas)
		reg.MustRegister(c)
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// sessionCollector exports the per-turn histogram and the errors by code: error frames and
// events (session) plus HTTP error answers (http).
type sessionCollector struct {
	m    *session.Metrics
	http *codeCounts
}

var (
	turnDesc  = prometheus.NewDesc("tether_turn_seconds", "Server time per turn: from accepting a create or append to the rollout's suspension or end, queueing included.", nil, nil)
	errorDesc = prometheus.NewDesc("tether_errors_total", "Errors sent, by code: WebSocket error frames, SSE error events and HTTP error answers (401, 404, 413, 429, 503, …).", []string{"code"}, nil)
)

func (c *sessionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- turnDesc
	ch <- errorDesc
}

func (c *sessionCollector) Collect(ch chan<- prometheus.Metric) {
	n, sum, cum := c.m.Turns()
	buckets := make(map[float64]uint64, len(cum))
	for i, b := range session.TurnBuckets {
		buckets[b] = uint64(cum[i])
	}
	ch <- prometheus.MustNewConstHistogram(turnDesc, uint64(n), sum, buckets)
	errs := c.m.Errors()
	for code, v := range c.http.snapshot() {
		errs[code] += v
	}
	for code, v := range errs {
		ch <- prometheus.MustNewConstMetric(errorDesc, prometheus.CounterValue, float64(v), code)
	}
}

// slotCollector exports the process's waits for heavy-work slots (protocol.SlotWaits): the
// decoding and encoding of large bodies, frames and answers, and the sim's tokenizing of
// large texts, which take turns on one processor fewer than GOMAXPROCS.
type slotCollector struct{}

var (
	slotWaitDesc = prometheus.NewDesc("tether_cpu_slot_wait_seconds",
		"Time heavy work (decoding, encoding or tokenizing a MiB or more) waited for one of the heavy-work slots, abandoned waits included; a slot that was free counts as 0.", nil, nil)
	slotAbandonedDesc = prometheus.NewDesc("tether_cpu_slot_abandoned_total",
		"Waits for a heavy-work slot that ended because the request's client went away (or its connection or step ended) first: their work never ran.", nil, nil)
	slotWaitingDesc = prometheus.NewDesc("tether_cpu_slot_waiting", "Heavy work waiting for a heavy-work slot now.", nil, nil)
	slotsDesc       = prometheus.NewDesc("tether_cpu_slots", "Heavy-work slots: one fewer than GOMAXPROCS, at least one.", nil, nil)
)

func (slotCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- slotWaitDesc
	ch <- slotAbandonedDesc
	ch <- slotWaitingDesc
	ch <- slotsDesc
}

func (slotCollector) Collect(ch chan<- prometheus.Metric) {
	w := protocol.SlotWaits()
	buckets := make(map[float64]uint64, len(w.Cumulative))
	for i, b := range protocol.SlotWaitBuckets {
		buckets[b] = uint64(w.Cumulative[i])
	}
	ch <- prometheus.MustNewConstHistogram(slotWaitDesc, uint64(w.Count), w.Sum, buckets)
	ch <- prometheus.MustNewConstMetric(slotAbandonedDesc, prometheus.CounterValue, float64(w.Abandoned))
	ch <- prometheus.MustNewConstMetric(slotWaitingDesc, prometheus.GaugeValue, float64(w.Waiting))
	ch <- prometheus.MustNewConstMetric(slotsDesc, prometheus.GaugeValue, float64(protocol.CPUSlots()))
}
