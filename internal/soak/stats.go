package soak

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// outcome is how one rollout ended, seen from the client.
type outcome int

const (
	outCompleted   outcome = iota // answered; every item verified
	outCancelled                  // response.cancel → incomplete "cancelled"; items verified
	outAborted                    // the client dropped the connection mid-rollout (chaos)
	outDropped                    // a stalled reader was dropped by the server (write timeout or ping)
	outRefused                    // the server refused the create with a capacity error
	outBroken                     // a violation or an unexpected error: the connection is discarded
	outInterrupted                // the run's hard deadline passed mid-rollout
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"completed", "cancelled", "aborted", "dropped", "refused", "broken", "interrupted"}

func (o outcome) String() string { return outcomeNames[o] }

// maxSamples bounds the violation messages kept for the report.
const maxSamples = 25

// stats are the counters shared by the workers. Safe for concurrent use.
type stats struct {
	rollouts [2][numOutcomes]atomic.Int64 // by shape, by outcome
	steps    atomic.Int64                 // sampling steps seen to their end (suspension or terminal)

	dials, dialFailures           atomic.Int64
	disconnectsSuspended          atomic.Int64
	disconnectsSampling           atomic.Int64
	cancelsSuspended              atomic.Int64
	cancelsSampling               atomic.Int64
	cancelRaceLost                atomic.Int64 // cancel sent while sampling, rollout completed first
	badFrames, badAppends         atomic.Int64 // sent
	badAnswered                   atomic.Int64 // error frames matching a bad frame or append
	slowReaders, stalledReaders   atomic.Int64
	stallsNotDropped, slowDropped atomic.Int64
	coldContinuations             atomic.Int64 // public continuations that reported cached_tokens 0
	frames, bytes                 atomic.Int64
	itemsVerified                 atomic.Int64
	itemsLost, itemsDuplicated    atomic.Int64
	eventsLost, eventsDuplicated  atomic.Int64
	errorsLost                    atomic.Int64 // bad frames never answered
	violations                    atomic.Int64
	openConns                     atomic.Int64
	errorCodes                    sync.Map // string → *atomic.Int64

	mu      sync.Mutex // guards samples
	samples []string
}

func (s *stats) outcome(sh shape, o outcome) { s.rollouts[sh][o].Add(1) }

func (s *stats) count(m *sync.Map, key string) {
	v, _ := m.LoadOrStore(key, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func snapshot(m *sync.Map) map[string]int64 {
	out := map[string]int64{}
	m.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// violation records a violation; trail, the connection's recent frames, goes with the first
// few samples.
func (s *stats) violation(trail []string, format string, args ...any) {
	s.violations.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) < maxSamples {
		msg := fmt.Sprintf(format, args...)
		if len(s.samples) < maxTrails && len(trail) > 0 {
			msg += "\n      recent frames on the connection (deltas left out):\n        " + strings.Join(trail, "\n        ")
		}
		s.samples = append(s.samples, msg)
	}
}

// maxTrails bounds the samples that carry the connection's recent frames.
const maxTrails = 5

func (s *stats) completed() int64 {
	var n int64
	for sh := range s.rollouts {
		n += s.rollouts[sh][outCompleted].Load() + s.rollouts[sh][outCancelled].Load()
	}
	return n
}
