package compat_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/redistest"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/session"
	"github.com/tetherd/tether/session/store"
)

// faultyRedis is a real Redis store that fails some calls on demand: the writes of background
// records (SaveBackground, SaveBackgrounds) while failSaves is set, DeleteBackground while
// failDeletes is set.
type faultyRedis struct {
	*store.Redis
	failSaves, failDeletes atomic.Bool
}

var errInjected = errors.New("injected: redis timeout")

func (f *faultyRedis) SaveBackground(ctx context.Context, owner, id string, rec []byte, evs []session.BackgroundEvent, first int, ttl time.Duration) (bool, error) {
	if f.failSaves.Load() {
		return false, errInjected
	}
	return f.Redis.SaveBackground(ctx, owner, id, rec, evs, first, ttl)
}

func (f *faultyRedis) SaveBackgrounds(ctx context.Context, saves []session.BackgroundSave) ([]bool, error) {
	if f.failSaves.Load() {
		return nil, errInjected
	}
	return f.Redis.SaveBackgrounds(ctx, saves)
}

func (f *faultyRedis) DeleteBackground(ctx context.Context, owner, id string) error {
	if f.failDeletes.Load() {
		return errInjected
	}
	return f.Redis.DeleteBackground(ctx, owner, id)
}

// faultyFixture starts a real redis-server and one instance (of the windowSim) on it through a
// faultyRedis.
func faultyFixture(t *testing.T) (*fixture, *faultyRedis) {
	t.Helper()
	rs := redistest.Start(t)
	st, err := store.NewRedis(context.Background(), rs.URL(), store.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	fr := &faultyRedis{Redis: st}
	return newFixture(t, server.Options{Model: windowSim(), Store: fr}), fr
}

// TestBackgroundFailedUnrecorded: a background response that ended failed while the shared
// store refused every write of its record is kept only by the instance that ran it, which
// answers it (GET 200 failed, a cancel 400) from its copy, and deletes it.
func TestBackgroundFailedUnrecorded(t *testing.T) {
	f, fr := faultyFixture(t)
	ctx := t.Context()
	fr.failSaves.Store(true)
	id := endedOn(t, f, failedInput)
	fr.failSaves.Store(false)
	if got := jsonAnswer(t, do(t, ctx, "GET", f.base+"/responses/"+id, nil), 200); !windowFailed(got, "2000") {
		t.Fatalf("GET of the failed response whose record never reached the store: %v", got)
	}
	alreadyEnded(t, ctx, f.base, id)
	if del := jsonAnswer(t, do(t, ctx, "DELETE", f.base+"/responses/"+id, nil), 200); del.Get("deleted") != true {
		t.Fatalf("DELETE: %v", del)
	}
	gone(t, ctx, f.base, id)
}

// TestBackgroundDeleteRecordFails: a DELETE of a completed background response whose shared
// record's deletion fails is 503 store_unavailable, and the stored Response is still there:
// GET, its input items and a continuation answer as before. A DELETE again deletes it.
func TestBackgroundDeleteRecordFails(t *testing.T) {
	f, fr := faultyFixture(t)
	ctx := t.Context()
	id := endedOn(t, f, "a short answer")
	fr.failDeletes.Store(true)
	if e := jsonAnswer(t, do(t, ctx, "DELETE", f.base+"/responses/"+id, nil), 503); e.Str("error", "code") != "store_unavailable" {
		t.Fatalf("DELETE while the record's deletion fails: %v", e)
	}
	fr.failDeletes.Store(false)
	if got := jsonAnswer(t, do(t, ctx, "GET", f.base+"/responses/"+id, nil), 200); got.Str("status") != "completed" {
		t.Fatalf("GET after the failed DELETE: %v", got)
	}
	jsonAnswer(t, do(t, ctx, "GET", f.base+"/responses/"+id+"/input_items", nil), 200)
	next := map[string]any{"model": "sim", "input": "and then?", "previous_response_id": id}
	if got := jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses", next), 200); got.Str("status") != "completed" {
		t.Fatalf("a continuation after the failed DELETE: %v", got)
	}
	if del := jsonAnswer(t, do(t, ctx, "DELETE", f.base+"/responses/"+id, nil), 200); del.Get("deleted") != true {
		t.Fatalf("DELETE again: %v", del)
	}
	gone(t, ctx, f.base, id)
}
