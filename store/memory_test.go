package store_test

import (
	"testing"

	"github.com/tetherd/tether/store"
	"github.com/tetherd/tether/store/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T, maxCount int, maxBytes int64) store.Store {
		return store.NewMemory(maxCount, maxBytes)
	})
}
