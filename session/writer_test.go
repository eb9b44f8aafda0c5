package session

import (
	"sync"
	"testing"
	"testing/synctest"
)

// TestWriteLockOrder: writers that wait are granted the lock in the order they arrived.
func TestWriteLockOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l writeLock
		l.Lock()
		var mu sync.Mutex
		var got []int
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.Lock()
				mu.Lock()
				got = append(got, i)
				mu.Unlock()
				l.Unlock()
			}()
			synctest.Wait() // writer i is queued before writer i+1 starts
		}
		l.Unlock()
		wg.Wait()
		for i, v := range got {
			if v != i {
				t.Fatalf("grant order %v, want arrival order", got)
			}
		}
	})
}

// TestWriteLockRoundRobin: two lanes writing many frames each alternate, one frame per turn.
func TestWriteLockRoundRobin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l writeLock
		var mu sync.Mutex
		var got []string
		var wg sync.WaitGroup
		l.Lock() // both lanes queue before the first grant
		for _, lane := range []string{"a", "b"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 4 {
					l.Lock()
					mu.Lock()
					got = append(got, lane)
					mu.Unlock()
					// The other lane is queued (or done) before this one lets go: a lane
					// that is not waiting may take the lock twice, which is not the point.
					synctest.Wait()
					l.Unlock()
				}
			}()
			synctest.Wait()
		}
		l.Unlock()
		wg.Wait()
		for i := 1; i < len(got); i++ {
			if got[i] == got[i-1] {
				t.Fatalf("lane %s wrote twice in a row while the other waited: %v", got[i], got)
			}
		}
	})
}
