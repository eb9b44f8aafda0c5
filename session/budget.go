package session

import (
	"net/http"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/tetherd/tether/protocol"
)

// DecodeFactor is how many bytes of memory Budget reserves per received byte: the frame or
// body itself plus what decoding it into items takes (many tiny items decode to several
// times their JSON size).
const DecodeFactor = 4

// Budget is the server-wide memory bound (the -max-memory flag), shared by every connection
// and request: client frames and POST bodies being read and decoded, and the bytes that
// rollouts and connection registries hold (items and settings, Options.Budget). It also
// holds an optional bound on HTTP bodies being decoded at once. A reservation that does not
// fit is refused at once (server_overloaded, 503); nothing waits. A nil *Budget admits
// everything. Safe for concurrent use.
type Budget struct {
	max      int64               // 0: no byte bound
	requests *semaphore.Weighted // nil: no bound
	// Rejected counts refused reservations.
	Rejected atomic.Int64
	inUse    atomic.Int64
}

// NewBudget returns a Budget of maxBytes (≤ 0 means no byte bound) and maxRequests HTTP bodies
// decoded at once (≤ 0 means no bound).
func NewBudget(maxBytes int64, maxRequests int) *Budget {
	b := &Budget{max: max(maxBytes, 0)}
	if maxRequests > 0 {
		b.requests = semaphore.NewWeighted(int64(maxRequests))
	}
	return b
}

// Max is the byte bound (0: none).
func (b *Budget) Max() int64 {
	if b == nil {
		return 0
	}
	return b.max
}

// InUse reports the bytes reserved now.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	return b.inUse.Load()
}

// TryReserve reserves n bytes; false (and a count in Rejected) when they do not fit.
func (b *Budget) TryReserve(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	for {
		cur := b.inUse.Load()
		if b.max > 0 && cur+n > b.max {
			b.Rejected.Add(1)
			return false
		}
		if b.inUse.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// Grow counts n more bytes (negative: fewer) without a check: memory that a rollout took
// after its admission (model output), or released.
func (b *Budget) Grow(n int64) {
	if b != nil {
		b.inUse.Add(n)
	}
}

// Release returns n bytes reserved by TryReserve.
func (b *Budget) Release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.inUse.Add(-n)
}

// AdmitBody admits one HTTP body of n bytes (DecodeFactor·n reserved) and one slot of the
// concurrent-request bound. It returns the function that releases both, or
// server_overloaded (503).
func (b *Budget) AdmitBody(n int64) (release func(), _ *protocol.Error) {
	if b == nil {
		return func() {}, nil
	}
	if b.requests != nil && !b.requests.TryAcquire(1) {
		b.Rejected.Add(1)
		return nil, OverloadedError("too many requests are being decoded")
	}
	if !b.TryReserve(n * DecodeFactor) {
		if b.requests != nil {
			b.requests.Release(1)
		}
		return nil, OverloadedError("the server's memory budget for requests being decoded is in use")
	}
	return func() {
		b.Release(n * DecodeFactor)
		if b.requests != nil {
			b.requests.Release(1)
		}
	}, nil
}

// OverloadedError is the server_overloaded error (503): the server-wide memory budget or the
// bound on requests being decoded is exhausted; the client may retry later.
func OverloadedError(why string) *protocol.Error {
	return &protocol.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeServer, Code: protocol.CodeOverloaded,
		Message: "The server is overloaded (" + why + "): retry later."}
}
