package store_test

import (
	"testing"

	"github.com/tetherd/tether/session/store"
	"github.com/tetherd/tether/session/store/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T, maxCount int, maxBytes int64) store.Store {
		return store.NewMemory(maxCount, maxBytes)
	})
}

// TestGuardedMemory: a Guarded store passes the suite too (ParkerOf looks through it).
func TestGuardedMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T, maxCount int, maxBytes int64) store.Store {
		return store.Guard(store.NewMemory(maxCount, maxBytes), 0, nil)
	})
}
