package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tetherd/tether/client"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/session"
)

// TestCallsAfterClose: after Close every call that would use the connection says it is closed
// (ErrClosed), whatever the rollout's state was: a suspended rollout's Events reports ErrClosed
// once, and its Append, Cancel and Run, like a completed rollout's Append and Cancel, return
// ErrClosed, not ErrEnded; a completed rollout keeps its Response. Close again is a no-op.
func TestCallsAfterClose(t *testing.T) {
	shapes(t, server.Options{}, func(t *testing.T, c *client.Conn) {
		ctx := ctxT(t)
		done, err := c.Run(ctx, twoCalls("done before Close"), client.RunOptions{})
		if err != nil || done.Status != "completed" {
			t.Fatalf("Run: %v, %+v", err, done)
		}
		completed := mustStart(t, c, "completed before Close")
		if _, err := completed.Run(ctx, client.RunOptions{}); err != nil {
			t.Fatal(err)
		}
		suspended := mustStart(t, c, "suspended at Close")
		drain(t, suspended)
		s := suspended.Suspension()
		if s == nil {
			t.Fatal("not suspended")
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		checkClosed(t, "Start", func() error { _, err := c.Start(ctx, twoCalls("after Close")); return err })
		checkClosed(t, "Conn.Run", func() error { _, err := c.Run(ctx, twoCalls("after Close"), client.RunOptions{}); return err })
		var got []error
		for _, err := range suspended.Events(ctx) {
			got = append(got, err)
		}
		if len(got) != 1 || !errors.Is(got[0], client.ErrClosed) {
			t.Errorf("Events of the suspended rollout: %v, want one ErrClosed", got)
		}
		if suspended.Suspension() != nil {
			t.Error("Suspension after Close: still suspended")
		}
		for name, r := range map[string]*client.Rollout{"suspended": suspended, "completed": completed} {
			checkClosed(t, name+" Append", func() error { return r.Append(ctx, s.Calls[0].Output("late")) })
			checkClosed(t, name+" Cancel", func() error { return r.Cancel(ctx) })
		}
		checkClosed(t, "Rollout.Run", func() error { _, err := suspended.Run(ctx, client.RunOptions{}); return err })
		if resp, err := completed.Run(ctx, client.RunOptions{}); err != nil || resp == nil || resp.Status != "completed" {
			t.Errorf("Run of the completed rollout after Close: %v, %+v; want its Response", err, resp)
		}
		if err := c.Close(); err != nil {
			t.Errorf("Close again: %v", err)
		}
	})
}

// TestDetachedAfterClose: a rollout suspended when the server ended the connection at its age
// limit waits, detached, for an Append on a new connection; after Close it is not suspended
// any more, its Events reports ErrClosed once, and Append returns ErrClosed.
func TestDetachedAfterClose(t *testing.T) {
	shapes(t, server.Options{Limits: session.Limits{MaxConnectionAge: 300 * time.Millisecond}}, func(t *testing.T, c *client.Conn) {
		ctx := ctxT(t)
		r := mustStart(t, c, "detached at Close")
		drain(t, r)
		s := r.Suspension()
		if s == nil {
			t.Fatal("not suspended")
		}
		<-c.LinkDone()
		drain(t, r) // the server's response.incomplete (connection_limit) is not passed on
		if r.Suspension() == nil {
			t.Fatal("not suspended after the age limit")
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if r.Suspension() != nil {
			t.Error("Suspension after Close: still suspended")
		}
		var got []error
		for _, err := range r.Events(ctx) {
			got = append(got, err)
		}
		if len(got) != 1 || !errors.Is(got[0], client.ErrClosed) {
			t.Errorf("Events after Close: %v, want one ErrClosed", got)
		}
		checkClosed(t, "Append", func() error { return r.Append(ctx, s.Calls[0].Output("late")) })
		checkClosed(t, "Cancel", func() error { return r.Cancel(ctx) })
	})
}

func mustStart(t *testing.T, c *client.Conn, input string) *client.Rollout {
	t.Helper()
	r, err := c.Start(ctxT(t), twoCalls(input))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// drain reads the rollout's events up to its next stop and fails on an error.
func drain(t *testing.T, r *client.Rollout) {
	t.Helper()
	for _, err := range r.Events(ctxT(t)) {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func checkClosed(t *testing.T, call string, f func() error) {
	t.Helper()
	if err := f(); !errors.Is(err, client.ErrClosed) {
		t.Errorf("%s after Close: %v, want ErrClosed", call, err)
	}
}
