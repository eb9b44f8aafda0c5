package responses_test

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/tetherd/tether/conformance"
	"github.com/tetherd/tether/internal/server"
)

// chainMaxFrame is the front's frame limit: small, so the oversize scenarios are cheap.
const chainMaxFrame = 64 << 10

// TestChainConforms runs the conformance suite (both shapes, model contract "any") against a
// Tether whose backend is this package, chained to a sim Tether upstream.
func TestChainConforms(t *testing.T) {
	up := upstream(t, server.Options{})
	m := newModel(t, up+"/v1", 10*time.Second)
	_, fr := startFront(t, server.Options{Model: m, MaxFrame: chainMaxFrame})
	cfg := conformance.Config{URL: fr + "/v1", Shape: conformance.ShapeBoth, Contract: conformance.ContractAny,
		MaxFrame: chainMaxFrame, Timeout: 10 * time.Second}
	if _, err := os.Stat(schemaFile); err == nil {
		cfg.SchemaFile = schemaFile
	}
	var out bytes.Buffer
	rep := conformance.Run(t.Context(), cfg, &out)
	t.Logf("chain:\n%s", out.String())
	if rep.Failed != 0 || rep.Passed == 0 {
		t.Fatalf("%d scenarios failed against the chain:\n%s", rep.Failed, out.String())
	}
}

// schemaFile is the Open Responses OpenAPI file in ../shared beside the repository.
const schemaFile = "../../../shared/reference/openresponses-openapi-2026-04-24.json"
