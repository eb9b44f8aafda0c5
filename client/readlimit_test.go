package client_test

import (
	"errors"
	"testing"

	"github.com/tetherd/tether/client"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
)

// TestReadLimit: a server message larger than Options.ReadLimit ends the connection, and the
// rollout waiting for it with ErrConnectionLost; the next Start says so too.
func TestReadLimit(t *testing.T) {
	_, base := servertest.Start(t, server.Options{})
	c := dial(t, base+"/v1", &client.Options{ReadLimit: 64})
	ctx := ctxT(t)
	r := mustStart(t, c, "a response.created is longer than 64 bytes")
	var got error
	for _, err := range r.Events(ctx) {
		got = err
	}
	if !errors.Is(got, client.ErrConnectionLost) {
		t.Fatalf("Events: %v, want ErrConnectionLost", got)
	}
	t.Log(got)
	if _, err := c.Start(ctx, twoCalls("again")); !errors.Is(err, client.ErrConnectionLost) {
		t.Errorf("Start: %v, want ErrConnectionLost", err)
	}
}
