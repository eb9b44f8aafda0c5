package store

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/tetherd/tether/protocol"
)

// DefaultTimeout bounds one store call (-store-timeout).
const DefaultTimeout = 5 * time.Second

// Guarded wraps a Store for a server: every call runs under a timeout, and every store
// failure (not ErrNotFound or ErrCursorNotFound) is counted. The first failure logs "store
// unavailable" at warn (later ones at debug) and the first success after it logs "store
// available again", so a Redis outage is two log lines, not one per request. A slow store
// holds a caller for at most the timeout.
type Guarded struct {
	s       Store
	timeout time.Duration
	log     *slog.Logger
	errors  atomic.Int64
	down    atomic.Bool // the last call failed
}

// Guard wraps s; timeout 0 means DefaultTimeout, a nil log means slog.Default().
func Guard(s Store, timeout time.Duration, log *slog.Logger) *Guarded {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if log == nil {
		log = slog.Default()
	}
	return &Guarded{s: s, timeout: timeout, log: log}
}

// Unwrap returns the wrapped store.
func (g *Guarded) Unwrap() Store { return g.s }

// Errors reports the store failures so far (tether_store_errors_total).
func (g *Guarded) Errors() int64 { return g.errors.Load() }

func (g *Guarded) check(op, id string, err error) error {
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrCursorNotFound) {
		if g.down.CompareAndSwap(true, false) {
			g.log.Info("store available again", "op", op)
		}
		return err
	}
	g.errors.Add(1)
	if g.down.CompareAndSwap(false, true) {
		g.log.Warn("store unavailable: store:true responses fail with store_unavailable until it answers again", "op", op, "id", id, "err", err)
	} else {
		g.log.Debug("store failure", "op", op, "id", id, "err", err)
	}
	return err
}

// Put implements Store.
func (g *Guarded) Put(ctx context.Context, r *Response) error {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	return g.check("put", r.Response.ID, g.s.Put(ctx, r))
}

// Get implements Store.
func (g *Guarded) Get(ctx context.Context, id, owner string) (*Response, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	r, err := g.s.Get(ctx, id, owner)
	return r, g.check("get", id, err)
}

// Delete implements Store.
func (g *Guarded) Delete(ctx context.Context, id, owner string) error {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	return g.check("delete", id, g.s.Delete(ctx, id, owner))
}

// InputItems implements Store.
func (g *Guarded) InputItems(ctx context.Context, id, owner string, p Page) (ItemList, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	l, err := g.s.InputItems(ctx, id, owner, p)
	return l, g.check("input_items", id, err)
}

// Chain implements Store.
func (g *Guarded) Chain(ctx context.Context, id, owner string) ([]protocol.Item, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	items, err := g.s.Chain(ctx, id, owner)
	return items, g.check("chain", id, err)
}

// Close closes the wrapped store.
func (g *Guarded) Close() error { return g.s.Close() }
