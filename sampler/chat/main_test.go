package chat_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/tetherd/tether/internal/skipnote"
)

// TestMain checks for leaked goroutines and says, in the default output, when the tests that
// need a real llama-server were skipped.
func TestMain(m *testing.M) { goleak.VerifyTestMain(skipnote.M(m, "sampler/chat")) }
