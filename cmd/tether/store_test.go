package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/redistest"
)

// Redis down at start is a clear startup error, not a server that fails every store:true
// response.
func TestServeRedisDownAtStart(t *testing.T) {
	rs := redistest.Start(t)
	rs.Stop()
	err := serve(context.Background(), []string{"-addr", "127.0.0.1:0", "-store", rs.URL(), "-store-timeout", "1s"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-store") || !strings.Contains(err.Error(), "cannot reach Redis at "+rs.Addr()) {
		t.Fatalf("serve with Redis down: %v", err)
	}
}
