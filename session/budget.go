package session

import (
	"bytes"
	"net/http"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/tetherd/tether/protocol"
)

// DecodeFactor is how many bytes of memory Budget reserves per received byte while a frame
// or body is read: the bytes themselves and their decoded text. ItemDecodeCost is what is
// reserved in addition, once the frame is read and before it is decoded, per '{' in it (an
// upper bound of the objects, hence items, it decodes to): a decoded item takes a few hundred
// bytes however small its JSON, so 32 MiB of tiny items decode to gigabytes.
const (
	DecodeFactor   = 4
	ItemDecodeCost = 1024
)

// DecodeCost is the reservation for decoding frame: DecodeFactor per byte plus ItemDecodeCost
// per '{'.
func DecodeCost(frame []byte) int64 {
	return int64(len(frame))*DecodeFactor + int64(bytes.Count(frame, []byte{'{'}))*ItemDecodeCost
}

// Budget is the server-wide memory bound (the -max-memory flag), shared by every connection
// and request: client frames and POST bodies being read and decoded, the bytes that
// rollouts and connection registries hold (items and settings, Options.Budget), and the
// frames queued to a WebSocket peer until they are written (Conn.Write). It also
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
func (b *Budget) TryReserve(n int64) bool { return b.reserve(n, false) }

// reserve is TryReserve; with force, bytes that do not fit are counted all the same (and true
// is returned, Rejected unchanged): memory that exists already and must be accounted.
func (b *Budget) reserve(n int64, force bool) bool {
	if b == nil || n <= 0 {
		return true
	}
	if force {
		b.inUse.Add(n)
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

// Reservation is what one HTTP body holds of a Budget: bytes and a decoding slot.
type Reservation struct {
	b     *Budget
	bytes int64
	slot  bool
}

// AdmitBody admits one HTTP body of n bytes (DecodeFactor·n reserved) and one slot of the
// concurrent-request bound, or returns server_overloaded (503). Release the Reservation once
// the body is decoded.
func (b *Budget) AdmitBody(n int64) (*Reservation, error) {
	if b == nil {
		return &Reservation{}, nil
	}
	if b.requests != nil && !b.requests.TryAcquire(1) {
		b.Rejected.Add(1)
		return nil, OverloadedError("too many requests are being decoded")
	}
	r := &Reservation{b: b, slot: b.requests != nil}
	if !r.Cover(n * DecodeFactor) {
		r.Release()
		return nil, OverloadedError("the server's memory budget for requests being decoded is in use")
	}
	return r, nil
}

// Cover grows the reservation to at least n bytes; false when that does not fit.
func (r *Reservation) Cover(n int64) bool {
	if r.b == nil || n <= r.bytes {
		return true
	}
	if !r.b.TryReserve(n - r.bytes) {
		return false
	}
	r.bytes = n
	return true
}

// Keep is for a body that has been decoded: it gives back the decoding slot and shrinks the
// reservation to at most n bytes (what the decoded request still holds, until Release).
func (r *Reservation) Keep(n int64) {
	if r == nil || r.b == nil {
		return
	}
	if r.slot {
		r.b.requests.Release(1)
		r.slot = false
	}
	if n = max(n, 0); n < r.bytes {
		r.b.Release(r.bytes - n)
		r.bytes = n
	}
}

// Release returns what r holds. Idempotent; a nil *Reservation holds nothing.
func (r *Reservation) Release() {
	if r == nil || r.b == nil {
		return
	}
	r.b.Release(r.bytes)
	r.bytes = 0
	if r.slot {
		r.b.requests.Release(1)
		r.slot = false
	}
}

// OverloadedError is the server_overloaded error (503): the server-wide memory budget or the
// bound on requests being decoded is exhausted; the client may retry later.
func OverloadedError(why string) *protocol.Error {
	return &protocol.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeServer, Code: protocol.CodeOverloaded,
		Message: "The server is overloaded (" + why + "): retry later."}
}
