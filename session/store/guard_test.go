package store_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/session/store"
)

// failing is a memory store whose calls fail while down is set.
type failing struct {
	store.Store
	down bool
}

func (f *failing) Get(ctx context.Context, id, owner string) (*store.Response, error) {
	if f.down {
		return nil, errors.New("connection refused")
	}
	return f.Store.Get(ctx, id, owner)
}

func TestGuardCountsAndLogsAnOutageOnce(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	f := &failing{Store: store.NewMemory(0, 0), down: true}
	g := store.Guard(f, time.Second, log)
	ctx := context.Background()
	for range 3 {
		if _, err := g.Get(ctx, "resp_1", ""); err == nil || errors.Is(err, store.ErrNotFound) {
			t.Fatalf("err = %v, want the store failure", err)
		}
	}
	f.down = false
	if _, err := g.Get(ctx, "resp_1", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound (not a failure)", err)
	}
	if g.Errors() != 3 {
		t.Fatalf("Errors = %d, want 3", g.Errors())
	}
	logs := buf.String()
	if strings.Count(logs, "store unavailable") != 1 || strings.Count(logs, "store available again") != 1 {
		t.Fatalf("want one 'unavailable' and one 'available again' line, got:\n%s", logs)
	}
}
