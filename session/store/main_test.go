package store_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/tetherd/tether/internal/skipnote"
)

// Close must release every goroutine of a store (go-redis's pool included).
func TestMain(m *testing.M) { goleak.VerifyTestMain(skipnote.M(m, "session/store")) }
