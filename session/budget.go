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
// rollouts and connection registries hold (items and settings, Options.Budget, plus the
// model session's state, sampler.StateSizer, and SuspendedLiveBytes per suspended rollout
// whose goroutine waits), the frames queued to a
// WebSocket peer until they are written (Conn.Write), and what a sampling step holds while it
// runs, whatever the backend (sampler.Budget): the text and tool-call arguments it accrues,
// counted by the rollout at sampler.AccrueFactor bytes a byte in sampler.AccrueChunk units
// until the step ends and its items are counted as the rollout's; an upstream's event or frame
// being read; a value the sim builds before it streams it. A step whose output does not fit
// fails (its response failed, server_error, the message naming the budget) and gives back
// what it held. It also holds an optional bound on HTTP bodies
// being decoded at once. A reservation that does not fit is refused at once
// (server_overloaded, 503); only a create or append, a frame or body being read
// (TryReserveFor) and a sampling step (its output, an upstream's event) first have suspended
// live rollouts parked to make room (pressure.go), and wait for that. A nil *Budget admits
// everything. Safe for concurrent use.
type Budget struct {
	max      int64               // 0: no byte bound
	requests *semaphore.Weighted // nil: no bound
	nreq     int64               // the bound of requests (0: none)
	shares   *shares             // nil: no per-key share
	// Rejected counts refused reservations.
	Rejected atomic.Int64
	inUse    atomic.Int64
	relief   relief // the connections whose suspended rollouts park to make room (pressure.go)
}

// NewBudget returns a Budget of maxBytes (≤ 0 means no byte bound) and maxRequests HTTP bodies
// decoded at once (≤ 0 means no bound).
func NewBudget(maxBytes int64, maxRequests int) *Budget {
	b := &Budget{max: max(maxBytes, 0)}
	if maxRequests > 0 {
		b.requests = semaphore.NewWeighted(int64(maxRequests))
		b.nreq = int64(maxRequests)
	}
	return b
}

// SetKeyShare gives each key a share of the decoding slots and of the bytes reserved for
// frames and bodies being read and decoded (AdmitBody, TryReserveFor): a key holding
// ⌈share·bound⌉ of either is refused server_overloaded (503) for more, whatever room is left,
// so that the rest stays for the other keys. A key holding nothing may always take one body
// (a share smaller than one body does not lock a key out). share ≤ 0 or ≥ 1 means no share.
// Call it before the Budget is used.
func (b *Budget) SetKeyShare(share float64) {
	if share <= 0 || share >= 1 {
		b.shares = nil
		return
	}
	b.shares = &shares{share: share, held: map[string]*keyHold{}}
}

// takeShare counts slots and bytes against key's share (own: what the growing reservation
// holds already); false when key is over it. Key "" has no share.
func (b *Budget) takeShare(key string, slots, bytes, own int64) bool {
	if b.shares == nil || key == "" {
		return true
	}
	if !b.shares.take(key, slots, bytes, own, b.nreq, b.max) {
		b.Rejected.Add(1)
		return false
	}
	return true
}

// giveShare returns what takeShare counted.
func (b *Budget) giveShare(key string, slots, bytes int64) {
	if b.shares != nil && key != "" {
		b.shares.give(key, slots, bytes)
	}
}

// TryReserveFor is TryReserve of n more bytes for one frame or body being read or decoded
// for key (QuotaKey; "" for none), within key's share (SetKeyShare); held is what that frame
// or body holds already (one frame or body alone always fits the share). When they do not fit
// in the budget, suspended live rollouts are parked to make room first (it may wait for them,
// a fraction of a second: call it without holding a connection's lock). Release them with
// ReleaseFor.
func (b *Budget) TryReserveFor(key string, held, n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	if !b.takeShare(key, 0, n, held) {
		return false
	}
	if !b.fit(n) && !(b.relieve(b.deficit(n)) && b.fit(n)) {
		b.Rejected.Add(1)
		b.giveShare(key, 0, n)
		return false
	}
	return true
}

// ReleaseFor returns n bytes reserved by TryReserveFor for key.
func (b *Budget) ReleaseFor(key string, n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.giveShare(key, 0, n)
	b.Release(n)
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
	if !b.fit(n) {
		b.Rejected.Add(1)
		return false
	}
	return true
}

// fit reserves n bytes (> 0) if they fit, counting nothing when they do not.
func (b *Budget) fit(n int64) bool {
	for {
		cur := b.inUse.Load()
		if b.max > 0 && cur+n > b.max {
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
	key   string // whose share it counts against ("" none)
	bytes int64
	slot  bool
}

// AdmitBody admits one HTTP body of n bytes (DecodeFactor·n reserved) and one slot of the
// concurrent-request bound for key (QuotaKey, within its share: SetKeyShare; "" for no
// share), or returns server_overloaded (503). Release the Reservation once the body is
// decoded.
func (b *Budget) AdmitBody(key string, n int64) (*Reservation, error) {
	if b == nil {
		return &Reservation{}, nil
	}
	if b.requests != nil {
		if !b.takeShare(key, 1, 0, 0) {
			return nil, OverloadedError("this key holds its share of the requests being decoded")
		}
		if !b.requests.TryAcquire(1) {
			b.giveShare(key, 1, 0)
			b.Rejected.Add(1)
			return nil, OverloadedError("too many requests are being decoded")
		}
	}
	r := &Reservation{b: b, key: key, slot: b.requests != nil}
	if !r.Cover(n * DecodeFactor) {
		r.Release()
		return nil, BudgetFullError("this request body")
	}
	return r, nil
}

// Cover grows the reservation to at least n bytes; false when that does not fit (in the
// budget, or in its key's share).
func (r *Reservation) Cover(n int64) bool {
	if r.b == nil || n <= r.bytes {
		return true
	}
	if !r.b.TryReserveFor(r.key, r.bytes, n-r.bytes) {
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
		r.b.giveShare(r.key, 1, 0)
		r.slot = false
	}
	if n = max(n, 0); n < r.bytes {
		r.b.ReleaseFor(r.key, r.bytes-n)
		r.bytes = n
	}
}

// Release returns what r holds. Idempotent; a nil *Reservation holds nothing.
func (r *Reservation) Release() {
	if r == nil || r.b == nil {
		return
	}
	r.b.ReleaseFor(r.key, r.bytes)
	r.bytes = 0
	if r.slot {
		r.b.requests.Release(1)
		r.b.giveShare(r.key, 1, 0)
		r.slot = false
	}
}

// BudgetFullError is the server_overloaded error (503) for work that the server-wide memory
// budget has no room for; what names the work ("this frame", "this request body", …) and the
// message says what holds the budget, so that a client knows whether a retry can succeed.
func BudgetFullError(what string) *protocol.Error {
	return OverloadedError("the server's memory budget has no room for " + what +
		": it is held by the requests, rollouts and kept responses in memory, a suspended rollout's share until it ends")
}

// OverloadedError is the server_overloaded error (503): the server-wide memory budget or the
// bound on requests being decoded is exhausted; the client may retry later.
func OverloadedError(why string) *protocol.Error {
	return &protocol.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeServer, Code: protocol.CodeOverloaded,
		Message: "The server is overloaded (" + why + "): retry later."}
}
