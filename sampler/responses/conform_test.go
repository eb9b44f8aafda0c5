package responses_test

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/tetherd/tether/conformance"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/session"
)

// chainMaxFrame is the front's frame limit: small, so the oversize scenarios are cheap.
const chainMaxFrame = 64 << 10

// TestChainConforms runs the conformance suite (both shapes) against a Tether whose backend
// is this package, chained to a sim Tether upstream: with model contract "any" (what every
// engine must pass), and with contract "sim", since the sim upstream's answers, call counts,
// failures and cached_tokens reach the client unchanged.
func TestChainConforms(t *testing.T) {
	up := upstream(t, server.Options{})
	m := newModel(t, up+"/v1", 10*time.Second)
	_, fr := startFront(t, server.Options{Model: m, Limits: session.Limits{MaxFrame: chainMaxFrame}})
	for _, contract := range []string{conformance.ContractAny, conformance.ContractSim} {
		t.Run(contract, func(t *testing.T) {
			cfg := conformance.Config{URL: fr + "/v1", Shape: conformance.ShapeBoth, Contract: contract,
				MaxFrame: chainMaxFrame, Timeout: 10 * time.Second}
			if _, err := os.Stat(schemaFile); err == nil {
				cfg.SchemaFile = schemaFile
			} else {
				t.Logf("NOT VALIDATING AGAINST THE SCHEMA: %v", err)
			}
			var out bytes.Buffer
			rep := conformance.Run(t.Context(), cfg, &out)
			t.Logf("chain, %s contract:\n%s", contract, out.String())
			if rep.Failed != 0 || rep.Passed == 0 {
				t.Fatalf("%d scenarios failed against the chain:\n%s", rep.Failed, out.String())
			}
			// The one skip allowed: this backend does not steer (steering_not_supported).
			for _, r := range rep.Results {
				if contract == conformance.ContractSim && r.Status == "skip" && r.Name != "public/steer/interrupt" {
					t.Fatalf("%s skipped under the sim contract: %s", r.Name, r.Reason)
				}
			}
		})
	}
}

// schemaFile is the Open Responses OpenAPI file, in a directory beside the repository.
const schemaFile = "../../../shared/reference/openresponses-openapi-2026-04-24.json"
