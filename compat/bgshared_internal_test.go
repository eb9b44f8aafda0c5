package compat

import (
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
