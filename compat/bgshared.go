package compat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
)

// A background response on a shared store (Background.Shared). The instance that runs it
// owns its record there and rewrites it every Sync (and when it is created and when it
// ends); every other instance only reads it, and leaves a cancel request beside it. The
// record carries a lease: the running instance vouches for it until then, and renews it at
// each write, so that a response whose instance went without ending it (killed, or its
// shutdown cut short) reads as failed once the lease is past rather than in_progress for
// ever.

// bgLease is how long a running instance vouches for a record it wrote: past it, with no
// newer write, the response reads as failed (bgStopped).
const bgLease = 10 * time.Second

// bgSaveTimeout bounds one write of a record (the store's own timeout applies too).
const bgSaveTimeout = 5 * time.Second

// bgLoadEvents is how many events a follower on another instance reads per load.
const bgLoadEvents = 256

// bgRecord is the record of a background response in the shared store, as JSON.
type bgRecord struct {
	// Response is the latest Response: status queued or in_progress while it runs, the
	// terminal Response (with its output) once it has ended.
	Response protocol.Response `json:"response"`
	// Ended: no more events will come.
	Ended bool `json:"ended"`
	// Lease is the time (unix ms) until which the running instance vouches for the record.
	Lease int64 `json:"lease"`
	// First and Next are the sequence_numbers of the first event kept and of the event
	// after the last one written; Max the bound of the kept events in bytes.
	First int   `json:"first"`
	Next  int   `json:"next"`
	Max   int64 `json:"max"`
}

// stopped reports whether the record is of a running response whose instance no longer
// vouches for it.
func (rec *bgRecord) stopped(now time.Time) bool {
	return !rec.Ended && now.UnixMilli() > rec.Lease
}

// current is the Response the record stands for: its Response, or a failed one when its
// instance stopped without ending it.
func (rec *bgRecord) current(now time.Time) protocol.Response {
	if !rec.stopped(now) {
		return rec.Response
	}
	return protocol.Finish(rec.Response, protocol.ResponseFailed, "", &protocol.ResponseError{Code: protocol.CodeServerError,
		Message: fmt.Sprintf("The instance running this background response stopped without ending it (no word from it for %s); it will not finish.", bgLease)},
		nil, protocol.Usage{}, rec.Lease/1000)
}

func (b *Background) sync() time.Duration {
	if b.Sync > 0 {
		return b.Sync
	}
	return DefaultBackgroundSync
}

func (b *Background) keep() time.Duration {
	if b.Keep > 0 {
		return b.Keep
	}
	return DefaultBackgroundKeep
}

// save writes run's record and the events it has not written yet to the shared store, the
// terminal record when end is set (a run that ended with no terminal event, its connection
// core closed by a shutdown, is stored failed: the instance shut down). A cancel request
// found there cancels run. A failed write is tried again at the next save (the events it
// did not write go with the next); the lease covers a run whose writes keep failing.
func (b *Background) save(run *bgRun, end bool) {
	now := time.Now()
	run.mu.Lock()
	rec := bgRecord{Response: run.snapshotLocked(), Ended: end, First: run.first, Next: run.next, Max: run.max}
	if end && run.final == nil {
		rec.Response = protocol.Finish(rec.Response, protocol.ResponseFailed, "", &protocol.ResponseError{Code: protocol.CodeServerError,
			Message: "The instance running this background response shut down before it ended; it did not finish."},
			nil, protocol.Usage{}, now.Unix())
	}
	var evs []session.BackgroundEvent
	for i := max(run.saved, run.first); i < run.next; i++ {
		ev := run.events[i-run.first]
		evs = append(evs, session.BackgroundEvent{Seq: i, Type: ev.typ, Data: ev.data})
	}
	run.mu.Unlock()
	ttl := b.keep()
	if !end {
		rec.Lease = now.Add(bgLease).UnixMilli()
		ttl += bgLease
	}
	data, err := json.Marshal(&rec)
	if err != nil {
		return // a Response always encodes
	}
	ctx, cancel := context.WithTimeout(context.Background(), bgSaveTimeout)
	defer cancel()
	cancelled, err := b.Shared.SaveBackground(ctx, run.owner, run.id, data, evs, rec.First, ttl)
	if err != nil {
		return // the store's guard logs it
	}
	run.saved = rec.Next
	if cancelled && !end {
		run.requestCancel()
	}
}

// loadShared reads the record of background response id of owner from the shared store with
// at most n of its events after sequence_number after.
func (b *Background) loadShared(ctx context.Context, id, owner string, after, n int) (*bgRecord, []session.BackgroundEvent, error) {
	data, evs, err := b.Shared.LoadBackground(ctx, owner, id, after, n)
	if err != nil {
		return nil, nil, err
	}
	var rec bgRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, nil, fmt.Errorf("compat: background record of %s: %w", id, err)
	}
	return &rec, evs, nil
}

// shared returns the store background responses are shared on, or nil.
func (h *HTTP) shared() *Background {
	if h.Background == nil || h.Background.Shared == nil {
		return nil
	}
	return h.Background
}

// getShared answers a GET (without stream) of id that the store does not have: from its
// record in the shared store while it runs on another instance, or when it ended without
// reaching the store (its instance shut down). It reports false when there is no record.
func (h *HTTP) getShared(w http.ResponseWriter, r *http.Request, id, owner string) bool {
	b := h.shared()
	if b == nil {
		return false
	}
	rec, _, err := b.loadShared(r.Context(), id, owner, -1, 0)
	if err != nil {
		return false
	}
	writeJSON(w, http.StatusOK, rec.current(time.Now()))
	return true
}

// followShared streams the events of background response id of owner from the shared store,
// as follow does for a response of this instance: the kept events after after at once, then
// those the running instance writes (read every Sync) until the terminal event. It reports
// false when the store has no record of id.
func (h *HTTP) followShared(w http.ResponseWriter, r *http.Request, id, owner string, after int) bool {
	b := h.shared()
	if b == nil {
		return false
	}
	next := nextAfter(after)
	out := newSSEOut(w, h.WriteTimeout)
	var wait *time.Ticker
	for {
		rec, evs, err := b.loadShared(r.Context(), id, owner, next-1, bgLoadEvents)
		switch {
		case errors.Is(err, session.ErrNotFound) && !out.started:
			return false
		case errors.Is(err, session.ErrNotFound): // deleted, or expired, while followed
			out.fail(notFound(id))
			return true
		case err != nil:
			if r.Context().Err() == nil {
				out.fail(session.StoreUnavailable())
			}
			return true
		case next < rec.First:
			out.fail(eventsExpired(id, rec.First, rec.Max))
			return true
		case len(evs) > 0 && evs[0].Seq != next: // dropped since the record was read
			out.fail(eventsExpired(id, evs[0].Seq, rec.Max))
			return true
		case rec.Ended && next > rec.Next:
			out.fail(pastLastEvent(id, after, rec.Next))
			return true
		case len(evs) == 0 && rec.stopped(time.Now()):
			cur := rec.current(time.Now())
			out.fail(protocol.Errorf(http.StatusInternalServerError, protocol.CodeServerError, "", "%s", cur.Error.Message))
			return true
		}
		out.start()
		for _, ev := range evs {
			if out.event(ev.Type, ev.Data) != nil {
				return true
			}
		}
		next += len(evs)
		if rec.Ended && next >= rec.Next {
			return true
		}
		if len(evs) == bgLoadEvents {
			continue
		}
		out.flush()
		if wait == nil {
			wait = time.NewTicker(b.sync())
			defer wait.Stop()
		}
		select {
		case <-wait.C:
		case <-r.Context().Done():
			return true
		}
	}
}

// cancelShared serves a cancel of a background response that runs on another instance: it
// leaves a cancel request in the shared store, which the running instance acts on at its
// next write (within Sync), then waits for the record to end and answers it. It reports
// false when the response is not running elsewhere (no record, or it has ended).
func (h *HTTP) cancelShared(w http.ResponseWriter, r *http.Request, id, owner string) bool {
	b := h.shared()
	if b == nil {
		return false
	}
	ctx := r.Context()
	rec, _, err := b.loadShared(ctx, id, owner, -1, 0)
	if err != nil || rec.Ended || rec.stopped(time.Now()) {
		return false
	}
	if err := b.Shared.CancelBackground(ctx, owner, id, b.keep()); err != nil {
		WriteError(w, session.StoreUnavailable())
		return true
	}
	tick := time.NewTicker(b.sync())
	defer tick.Stop()
	for !rec.Ended && !rec.stopped(time.Now()) {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return true
		}
		if rec, _, err = b.loadShared(ctx, id, owner, -1, 0); err != nil {
			WriteError(w, session.StoreUnavailable())
			return true
		}
	}
	final := rec.current(time.Now())
	answerCancel(w, &final)
	return true
}
