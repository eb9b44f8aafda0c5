package soak

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of Config.
const (
	DefaultConnections  = 50
	DefaultTurns        = 10
	DefaultDuration     = 20 * time.Second
	DefaultSuspended    = 1000
	DefaultSettle       = 30 * time.Second
	DefaultGrace        = 30 * time.Second
	DefaultSlowPause    = time.Second
	DefaultWriteTimeout = 2 * time.Second
	DefaultPingInterval = 10 * time.Second
	DefaultBigAnswer    = 40000
	DefaultTolerance    = 0.10
)

// Rates are the per-rollout probabilities of the chaos the soak injects. A negative value
// means 0; a zero Rates gets the defaults of DefaultRates.
type Rates struct {
	Disconnect float64 // the client drops the connection mid-rollout (suspended or sampling)
	Cancel     float64 // append shape: response.cancel while suspended or while sampling
	BadFrame   float64 // per turn: a bad frame (quiet, or sent while the server streams)
	BadAppend  float64 // append shape, per turn: a rejected append before the good one
	Slow       float64 // the client pauses reading for SlowPause while a big answer streams
	Stall      float64 // the client pauses reading for StallPause (longer than the write timeout)
}

// DefaultRates are the rates used when Config.Rates is zero.
var DefaultRates = Rates{Disconnect: 0.05, Cancel: 0.05, BadFrame: 0.05, BadAppend: 0.03, Slow: 0.005, Stall: 0.003}

// Config configures Run. The zero value (plus nothing) runs the defaults against an in-process
// server.
type Config struct {
	// URL is the WebSocket URL of a running server (ws://host:port/v1/responses; an http://
	// base URL is accepted too). Empty starts an in-process server (internal/server).
	URL string
	// APIKey is sent as "Authorization: Bearer …" when set.
	APIKey string
	// PID, for URL, is the server's process id: its RSS is read from /proc/PID/status. 0 reads
	// process_resident_memory_bytes from the server's /metrics instead.
	PID int
	// Connections is the number of connections held at once, half append shape, half public
	// shape (default 50).
	Connections int
	// Lanes, if positive, runs that many named lanes (stream_id "lane-0" … "lane-N-1") on each
	// connection of the load, each with its own worker, so a connection carries N rollouts at
	// once: one reader routes frames by stream_id, every event of a rollout must carry its lane's
	// stream_id, a frame of no lane is a violation, and the item and event checks hold per
	// lane. Socket-wide chaos is off (bad frames, whose errors name no lane; slow and stalled
	// readers); a disconnect aborts every lane of the socket. The warm-up and the suspended
	// measurement spread their rollouts over the lanes round robin. 0 (the default) sends no
	// stream_id: the default lane.
	Lanes int
	// Turns is the number of tool calls per rollout (metadata sim.calls); a rollout has Turns+1
	// sampling steps (default 10).
	Turns int
	// Duration is how long new rollouts are started (default 20s). Rollouts running at the end
	// may finish within Grace.
	Duration time.Duration
	// Warmup is the length of the same load run before "before" is measured, so that the
	// server is warm at this load (default: Duration, at most 2 minutes; negative: none).
	Warmup time.Duration
	// Grace bounds the wait for the rollouts running when Duration ends (default 30s).
	Grace time.Duration
	// Seed seeds the chaos; 0 means 1.
	Seed int64
	// Rates are the chaos probabilities (zero: DefaultRates).
	Rates Rates
	// SlowPause is how long a slow reader stops reading (default 1s).
	SlowPause time.Duration
	// StallPause is how long a stalled reader stops reading; it should exceed the server's write
	// timeout, so that the server drops it. 0 means: in-process WriteTimeout+2s, and no stalled
	// readers against a URL (whose write timeout is unknown).
	StallPause time.Duration
	// BigAnswer is the answer size, in tokens (metadata sim.answer_tokens), of the rollouts of
	// slow and stalled readers: enough output (about 6 MB of frames) to fill the socket buffers
	// (default 40000).
	BigAnswer int
	// Suspended is K, the number of suspended rollouts held to measure the memory of one
	// (default 1000; negative skips the measurement).
	Suspended int
	// Settle bounds the wait, after the load, for the server to return to its starting
	// goroutines and RSS (default 30s: an in-process server settles in milliseconds, a
	// remote one returns memory at its Go runtime's pace, about 15 s after a 500-connection
	// load). "before" may wait up to 3×Settle for the warm-up's memory to come back.
	Settle time.Duration
	// Tolerance is how far above the start goroutines and RSS may be after settling (default
	// 0.10: 10%).
	Tolerance float64
	// WriteTimeout and PingInterval configure the in-process server (defaults 2s and 10s).
	WriteTimeout time.Duration
	PingInterval time.Duration
	// Progress, if set, is called about once a second while the load runs.
	Progress func(Progress)
}

func (c Config) withDefaults() (Config, error) {
	if c.Connections == 0 {
		c.Connections = DefaultConnections
	}
	if c.Turns == 0 {
		c.Turns = DefaultTurns
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Warmup == 0 {
		c.Warmup = min(c.Duration, 2*time.Minute)
	}
	if c.Grace <= 0 {
		c.Grace = DefaultGrace
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Rates == (Rates{}) {
		c.Rates = DefaultRates
	}
	if c.SlowPause <= 0 {
		c.SlowPause = DefaultSlowPause
	}
	if c.BigAnswer <= 0 {
		c.BigAnswer = DefaultBigAnswer
	}
	if c.Suspended == 0 {
		c.Suspended = DefaultSuspended
	}
	if c.Settle <= 0 {
		c.Settle = DefaultSettle
	}
	if c.Tolerance <= 0 {
		c.Tolerance = DefaultTolerance
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.PingInterval <= 0 {
		c.PingInterval = DefaultPingInterval
	}
	if c.StallPause == 0 && c.URL == "" {
		c.StallPause = c.WriteTimeout + 2*time.Second
	}
	switch {
	case c.Connections < 2:
		return c, errors.New("soak: need at least 2 connections (one per shape)")
	case c.Turns < 1 || c.Turns > 10000:
		return c, fmt.Errorf("soak: turns must be 1…10000, got %d", c.Turns)
	case c.Lanes < 0 || c.Lanes > 32:
		return c, fmt.Errorf("soak: lanes must be 0…32 (OpenAI's limit of distinct stream_ids per connection), got %d", c.Lanes)
	case c.Duration < 0:
		return c, fmt.Errorf("soak: negative duration %s", c.Duration)
	}
	return c, nil
}
