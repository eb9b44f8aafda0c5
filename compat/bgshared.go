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

// bgRenew is how often, at most, the record of a running response that has nothing new (no
// event, the same Response) is written again: to renew its lease, well before it runs out.
const bgRenew = bgLease / 4

// bgSave is one save of a run being prepared: what Background.Shared gets, and what the run
// records once it is written.
type bgSave struct {
	run   *bgRun
	save  session.BackgroundSave
	next  int // the sequence_number after the last event written
	ver   int // the run's Response version written
	write bool
}

// prepare returns the save of run's record and of the events it has not written yet, the
// terminal record when end is set (a run that ended with no terminal event, its connection core
// closed by a shutdown, is stored failed: the instance shut down). Unless end or force, a run
// with nothing new since its last write and whose lease is younger than bgRenew is only asked
// for a cancel request (no write). Called under Background.saving.
func (b *Background) prepare(run *bgRun, end, force bool, now time.Time) bgSave {
	run.mu.Lock()
	sv := bgSave{run: run, next: run.next, ver: run.ver,
		save: session.BackgroundSave{Owner: run.owner, ID: run.id, First: run.first}}
	if !end && !force && run.saved >= run.next && run.savedVer == run.ver && now.Sub(run.written) < bgRenew {
		run.mu.Unlock()
		return sv
	}
	sv.write = true
	rec := bgRecord{Response: run.snapshotLocked(), Ended: end, First: run.first, Next: run.next, Max: run.max}
	for i := max(run.saved, run.first); i < run.next; i++ {
		ev := run.events[i-run.first]
		sv.save.Events = append(sv.save.Events, session.BackgroundEvent{Seq: i, Type: ev.typ, Data: ev.data})
	}
	final := run.final != nil
	run.mu.Unlock()
	if end && !final {
		rec.Response = protocol.Finish(rec.Response, protocol.ResponseFailed, "", &protocol.ResponseError{Code: protocol.CodeServerError,
			Message: "The instance running this background response shut down before it ended; it did not finish."},
			nil, protocol.Usage{}, now.Unix())
	}
	sv.save.TTL = b.keep()
	if !end {
		rec.Lease = now.Add(bgLease).UnixMilli()
		sv.save.TTL += bgLease
	}
	data, err := json.Marshal(&rec)
	if err != nil {
		data = []byte("null") // a Response always encodes
	}
	sv.save.Rec = data
	return sv
}

// done records that sv was written at now; it reports whether a cancel of its response was
// requested (the caller then cancels the run, outside Background.saving). Called under
// Background.saving.
func (sv *bgSave) done(cancel bool, now time.Time) bool {
	run := sv.run
	if sv.write {
		run.mu.Lock()
		run.saved, run.savedVer, run.written = sv.next, sv.ver, now
		run.mu.Unlock()
	}
	return cancel
}

// save writes run's record and new events to the shared store at once, alone (when it is
// created, and at its end, terminal when end is set; the running ones are written together by
// saveRunning). A cancel request found there cancels run. A failed write is tried again by
// the next (the events it did not write go with it); the lease covers a run whose writes keep
// failing.
func (b *Background) save(run *bgRun, end bool) {
	b.saving.RLock()
	defer b.saving.RUnlock()
	now := time.Now()
	sv := b.prepare(run, end, true, now)
	ctx, cancel := context.WithTimeout(context.Background(), bgSaveTimeout)
	defer cancel()
	s := sv.save
	cancelled, err := b.Shared.SaveBackground(ctx, s.Owner, s.ID, s.Rec, s.Events, s.First, s.TTL)
	if err != nil {
		return // the store's guard logs it
	}
	if end {
		run.mu.Lock()
		run.endSaved = true
		run.mu.Unlock()
	}
	if sv.done(cancelled, now) && !end {
		run.requestCancel()
	}
}

// saveRunning writes, in one call to the shared store (one round trip), the record and new
// events of every running response of this instance, and asks for their cancel requests:
// the cost of a Sync interval is one call, whatever the number of running responses. A
// response with nothing new is only asked for a cancel request, and written again every
// bgRenew to renew its lease. The responses whose cancel was requested are cancelled.
func (b *Background) saveRunning() {
	b.mu.Lock()
	runs := make([]*bgRun, 0, len(b.runs))
	for _, run := range b.runs {
		runs = append(runs, run)
	}
	b.mu.Unlock()
	b.saving.Lock()
	now := time.Now()
	var svs []bgSave
	for _, run := range runs {
		run.mu.Lock()
		ended := run.ended // its terminal record is written alone (watch), after this batch
		run.mu.Unlock()
		if !ended {
			svs = append(svs, b.prepare(run, false, false, now))
		}
	}
	if len(svs) == 0 {
		b.saving.Unlock()
		return
	}
	saves := make([]session.BackgroundSave, len(svs))
	for i := range svs {
		saves[i] = svs[i].save
	}
	ctx, cancel := context.WithTimeout(context.Background(), bgSaveTimeout)
	cancels, err := b.Shared.SaveBackgrounds(ctx, saves)
	cancel()
	var cancelled []*bgRun
	if err == nil {
		for i := range svs {
			if svs[i].done(cancels[i], now) {
				cancelled = append(cancelled, svs[i].run)
			}
		}
	}
	b.saving.Unlock()
	for _, run := range cancelled {
		run.requestCancel()
	}
}

// poll runs saveRunning every Sync until stop is closed (Close). Background starts it with its
// first response on a shared store.
func (b *Background) poll(stop <-chan struct{}) {
	defer b.wg.Done()
	t := time.NewTicker(b.sync())
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			b.saveRunning()
		}
	}
}

// startPolling starts poll unless it runs, or the Background is closed. Called with b.mu held.
func (b *Background) startPollingLocked() {
	if b.polling || b.closed {
		return
	}
	b.polling, b.stop = true, make(chan struct{})
	b.wg.Add(1)
	go b.poll(b.stop)
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

// recordKept reports whether the shared store holds the record of background response id of
// owner: ErrNotFound when it does not (deleted, or expired), another error when the store
// fails.
func (b *Background) recordKept(ctx context.Context, id, owner string) error {
	_, _, err := b.loadShared(ctx, id, owner, -1, 0)
	return err
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
// next write (within Sync), then waits for the record to end and answers it. One that ended
// failed (not stored; its record is all there is) is answered response_already_completed, as
// GET answers it from the record. It reports false when the store is to answer: no record, or
// one that ended otherwise.
func (h *HTTP) cancelShared(w http.ResponseWriter, r *http.Request, id, owner string) bool {
	b := h.shared()
	if b == nil {
		return false
	}
	ctx := r.Context()
	rec, _, err := b.loadShared(ctx, id, owner, -1, 0)
	if err != nil {
		return false
	}
	if now := time.Now(); rec.Ended || rec.stopped(now) {
		cur := rec.current(now)
		if cur.Status != protocol.ResponseFailed {
			return false
		}
		answerCancel(w, &cur)
		return true
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
