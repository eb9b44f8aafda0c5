package compat

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/protocol"
)

// TestBackgroundRecordLease: a running record reads as itself within its lease and as failed
// (server_error, saying its instance stopped) past it; an ended record never expires so.
func TestBackgroundRecordLease(t *testing.T) {
	now := time.Now()
	rec := bgRecord{Response: protocol.Response{ID: "resp_1", Status: protocol.ResponseInProgress, Background: true},
		Lease: now.Add(time.Second).UnixMilli()}
	if got := rec.current(now); got.Status != protocol.ResponseInProgress || rec.stopped(now) {
		t.Fatalf("within the lease: %s", got.Status)
	}
	later := now.Add(2 * time.Second)
	got := rec.current(later)
	if !rec.stopped(later) || got.Status != protocol.ResponseFailed || got.Error == nil ||
		got.Error.Code != protocol.CodeServerError || !strings.Contains(got.Error.Message, "stopped without ending it") || got.ID != "resp_1" {
		t.Fatalf("past the lease: %+v", got)
	}
	rec.Ended, rec.Response.Status = true, protocol.ResponseCompleted
	if got := rec.current(later); got.Status != protocol.ResponseCompleted {
		t.Fatalf("an ended record past its lease: %s", got.Status)
	}
}

// TestBackgroundSaveOnlyWhatIsNew: the poller's save of a running response writes its record
// and new events when it has any, or when its Response changed, or when its last write is
// bgRenew old (the lease is renewed); otherwise it only asks for a cancel request. A lone
// save (force) and the terminal one always write.
func TestBackgroundSaveOnlyWhatIsNew(t *testing.T) {
	b := &Background{}
	run := &bgRun{id: "resp_1", owner: "o", max: 1 << 20, wake: make(chan struct{})}
	now := time.Unix(1000, 0)
	write := func(end, force bool, at time.Time) bgSave {
		t.Helper()
		sv := b.prepare(run, end, force, at)
		if sv.write != (sv.save.Rec != nil) {
			t.Fatalf("write %v with record %q", sv.write, sv.save.Rec)
		}
		sv.done(false, at)
		return sv
	}
	if sv := write(false, true, now); !sv.write || len(sv.save.Events) != 0 {
		t.Fatalf("the first, lone save: %+v", sv)
	}
	if sv := write(false, false, now.Add(bgRenew/2)); sv.write {
		t.Fatal("nothing new, lease young: written")
	}
	_ = run.emit(&protocol.Event{Type: protocol.EventOutputTextDelta, SequenceNumber: 0, Delta: "a"})
	_ = run.emit(&protocol.Event{Type: protocol.EventOutputTextDelta, SequenceNumber: 1, Delta: "b"})
	if sv := write(false, false, now.Add(bgRenew/2)); !sv.write || len(sv.save.Events) != 2 || sv.save.Events[0].Seq != 0 {
		t.Fatalf("two new events: %+v", sv)
	}
	if sv := write(false, false, now.Add(bgRenew/2)); sv.write {
		t.Fatal("written again with nothing new")
	}
	resp := protocol.Response{ID: "resp_1", Status: protocol.ResponseInProgress}
	_ = run.emit(&protocol.Event{Type: protocol.EventInProgress, SequenceNumber: 2, Response: &resp})
	if sv := write(false, false, now.Add(bgRenew/2)); !sv.write || len(sv.save.Events) != 1 {
		t.Fatalf("a new Response: %+v", sv)
	}
	if sv := write(false, false, now.Add(bgRenew/2+bgRenew-time.Millisecond)); sv.write {
		t.Fatal("written before its lease needs renewing")
	}
	sv := write(false, false, now.Add(bgRenew/2+bgRenew))
	var rec bgRecord
	if !sv.write || json.Unmarshal(sv.save.Rec, &rec) != nil || rec.Lease != now.Add(bgRenew/2+bgRenew+bgLease).UnixMilli() {
		t.Fatalf("the renewal: %+v", sv)
	}
	if sv := write(true, false, now.Add(2*bgRenew)); !sv.write || json.Unmarshal(sv.save.Rec, &rec) != nil || !rec.Ended {
		t.Fatalf("the terminal save: %+v", sv)
	}
}
