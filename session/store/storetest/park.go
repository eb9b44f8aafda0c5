package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tetherd/tether/session/store"
)

// parker returns the store of f as a store.Parker; a store that keeps no parked rollouts
// skips the test.
func parker(t *testing.T, f Factory) store.Parker {
	t.Helper()
	p, ok := store.ParkerOf(open(t, f, 0, 0))
	if !ok {
		t.Skip("the store keeps no parked rollouts (store.Parker)")
	}
	return p
}

// testParkClaim: a parked value is claimed once, as it was parked (a later Park replaces it);
// a second Claim, another owner's, and another id's find nothing.
func testParkClaim(t *testing.T, f Factory) {
	p := parker(t, f)
	ctx := context.Background()
	if err := p.Park(ctx, "k1", "resp_1", []byte("first"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := p.Park(ctx, "k1", "resp_1", []byte(`{"v":2}`), time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err := p.Claim(ctx, "k2", "resp_1")
	wantNotFound(t, "another owner's Claim", err)
	_, err = p.Claim(ctx, "k1", "resp_2")
	wantNotFound(t, "a Claim of another id", err)
	v, err := p.Claim(ctx, "k1", "resp_1")
	if err != nil || string(v) != `{"v":2}` {
		t.Fatalf("Claim = %q, %v; want the value parked last", v, err)
	}
	_, err = p.Claim(ctx, "k1", "resp_1")
	wantNotFound(t, "a second Claim", err)
	if err := p.Park(ctx, "k1", "resp_3", []byte("x"), 0); !errors.Is(err, store.ErrBadTTL) {
		t.Fatalf("Park with ttl 0: %v, want ErrBadTTL", err)
	}
}

// testParkExpires: a value is gone once its ttl has passed.
func testParkExpires(t *testing.T, f Factory) {
	p := parker(t, f)
	ctx := context.Background()
	const ttl = 20 * time.Millisecond
	parkedAt := time.Now()
	if err := p.Park(ctx, "", "resp_1", []byte("v"), ttl); err != nil {
		t.Fatal(err)
	}
	for time.Since(parkedAt) <= ttl+5*time.Millisecond { // the state waited for is the clock
		time.Sleep(time.Millisecond)
	}
	_, err := p.Claim(ctx, "", "resp_1")
	wantNotFound(t, "a Claim after the ttl", err)
}

// testParkClaimRace: of many callers claiming one value at once, exactly one gets it.
func testParkClaimRace(t *testing.T, f Factory) {
	p := parker(t, f)
	ctx := context.Background()
	for round := range 20 {
		if err := p.Park(ctx, "k", "resp_race", []byte("v"), time.Minute); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		won, lost := 0, 0
		start := make(chan struct{})
		for range 8 {
			wg.Go(func() {
				<-start
				_, err := p.Claim(ctx, "k", "resp_race")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won++
				case errors.Is(err, store.ErrNotFound):
					lost++
				default:
					t.Errorf("Claim: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		if won != 1 || lost != 7 {
			t.Fatalf("round %d: %d claims won, %d lost; want 1 and 7", round, won, lost)
		}
	}
}

// testParkReplace: Replace changes a parked value that is still there (a Claim then gets the new
// one) and finds nothing once it is claimed, another owner's, or another id's.
func testParkReplace(t *testing.T, f Factory) {
	p := parker(t, f)
	ctx := context.Background()
	wantNotFound(t, "Replace of a value never parked", p.Replace(ctx, "k1", "resp_1", []byte("x"), time.Minute))
	if err := p.Park(ctx, "k1", "resp_1", []byte("first"), time.Minute); err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, "Replace of another owner's value", p.Replace(ctx, "k2", "resp_1", []byte("x"), time.Minute))
	if err := p.Replace(ctx, "k1", "resp_1", []byte("second"), time.Minute); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	if err := p.Replace(ctx, "k1", "resp_1", []byte("x"), 0); !errors.Is(err, store.ErrBadTTL) {
		t.Fatalf("Replace with ttl 0: %v, want ErrBadTTL", err)
	}
	v, err := p.Claim(ctx, "k1", "resp_1")
	if err != nil || string(v) != "second" {
		t.Fatalf("Claim = %q, %v; want the replaced value", v, err)
	}
	wantNotFound(t, "Replace of a claimed value", p.Replace(ctx, "k1", "resp_1", []byte("third"), time.Minute))
	_, err = p.Claim(ctx, "k1", "resp_1")
	wantNotFound(t, "a Claim after a Replace of a claimed value", err)
}
