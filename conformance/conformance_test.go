package conformance_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tetherd/tether/conformance"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/sampler/sim"
	"github.com/tetherd/tether/session"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// schemaFile is the Open Responses OpenAPI file, read from a directory beside the repository
// (never copied into it).
const schemaFile = "../../shared/reference/openresponses-openapi-2026-04-24.json"

// maxFrame is the in-process server's frame limit: small, so the oversize scenarios are cheap.
const maxFrame = 64 << 10

// tether starts Tether in-process with the sim model in real time (so sim.speed slows a
// response down) and returns its API base URL and handler.
func tether(t *testing.T) (string, *server.Server) {
	t.Helper()
	s, url := servertest.Start(t, server.Options{
		Model:  sim.NewSim(sim.SimOptions{Speed: sim.SpeedInstant, Realtime: true}),
		Limits: session.Limits{MaxFrame: maxFrame},
	})
	return url + "/v1", s
}

// schema returns the schema file, or "" (logged loudly) when the file is not beside the
// repository outside CI.
func schema(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(schemaFile); err != nil {
		if errors.Is(err, fs.ErrNotExist) && os.Getenv("CI") == "" {
			t.Logf("NOT VALIDATING AGAINST THE SCHEMA: %v — the Open Responses schema file is not beside the repository", err)
			return ""
		}
		t.Fatalf("schema: %v", err)
	}
	return schemaFile
}

var closing = regexp.MustCompile(`^(\d+) passed, (\d+) failed, (\d+) skipped( \(\d+ of them needs? the frame limit, which is unknown: pass -max-frame\))?$`)

// run runs the suite and checks the report's form: one line per scenario, the closing line,
// and a report that survives JSON.
func run(t *testing.T, cfg conformance.Config) (conformance.Report, string) {
	t.Helper()
	var out bytes.Buffer
	rep := conformance.Run(t.Context(), cfg, &out)
	text := out.String()
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if !closing.MatchString(lines[len(lines)-1]) {
		t.Fatalf("the last line is not the closing line: %q", lines[len(lines)-1])
	}
	if rep.Passed+rep.Failed+rep.Skipped != len(rep.Results) {
		t.Fatalf("counts %d+%d+%d for %d results", rep.Passed, rep.Failed, rep.Skipped, len(rep.Results))
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back conformance.Report
	if err := json.Unmarshal(b, &back); err != nil || back.Failed != rep.Failed || len(back.Results) != len(rep.Results) || len(back.Excluded) == 0 {
		t.Fatalf("the report does not round-trip through JSON: %v", err)
	}
	return rep, text
}

// TestTetherConforms runs the whole suite, both shapes, both model contracts, with schema
// validation, against Tether in-process, learning its frame limit from it.
func TestTetherConforms(t *testing.T) {
	url, _ := tether(t)
	sch := schema(t)
	for _, contract := range []string{conformance.ContractSim, conformance.ContractAny} {
		t.Run(contract, func(t *testing.T) {
			rep, out := run(t, conformance.Config{URL: url, Shape: conformance.ShapeBoth, Contract: contract,
				SchemaFile: sch, Timeout: 10 * time.Second})
			t.Logf("%s contract:\n%s", contract, out)
			if rep.Failed != 0 {
				t.Fatalf("%d scenarios failed against Tether:\n%s", rep.Failed, out)
			}
			if rep.MaxFrame != maxFrame || rep.MaxFrameSource != conformance.FrameLimitServer {
				t.Fatalf("frame limit %d from %q, want the server's %d", rep.MaxFrame, rep.MaxFrameSource, maxFrame)
			}
			if want := len(conformance.Scenarios(conformance.ShapeBoth)); len(rep.Results) != want {
				t.Fatalf("%d results, want %d scenarios", len(rep.Results), want)
			}
			if contract == conformance.ContractSim && rep.Skipped != 0 {
				t.Fatalf("%d scenarios skipped under the sim contract:\n%s", rep.Skipped, out)
			}
			if contract == conformance.ContractAny && (rep.Skipped == 0 || rep.Passed == 0) {
				t.Fatalf("under the any contract some scenarios must be skipped and others pass:\n%s", out)
			}
		})
	}
}

// TestFrameLimitFromServer: without Config.MaxFrame the suite learns Tether's frame limit from
// the server and runs every oversize scenario against it; an explicit limit wins.
func TestFrameLimitFromServer(t *testing.T) {
	url, _ := tether(t)
	re := regexp.MustCompile(`oversize`)
	rep, out := run(t, conformance.Config{URL: url, Run: re})
	if rep.Passed != 3 || rep.Passed != len(rep.Results) || rep.MaxFrame != maxFrame || rep.MaxFrameSource != conformance.FrameLimitServer {
		t.Fatalf("want the 3 oversize scenarios passed at the server's limit %d, got max_frame %d from %q:\n%s", maxFrame, rep.MaxFrame, rep.MaxFrameSource, out)
	}
	rep, out = run(t, conformance.Config{URL: url, Run: re, MaxFrame: maxFrame})
	if rep.Passed != 3 || rep.MaxFrameSource != conformance.FrameLimitFlag {
		t.Fatalf("an explicit limit: max_frame %d from %q:\n%s", rep.MaxFrame, rep.MaxFrameSource, out)
	}
}

// TestShapeSelection: -shape and -run select scenarios; public alone tests no append shape.
func TestShapeSelection(t *testing.T) {
	url, _ := tether(t)
	rep, out := run(t, conformance.Config{URL: url, Shape: conformance.ShapePublic, Run: regexp.MustCompile(`text-turn`)})
	if rep.Passed != 1 || rep.Results[0].Name != "public/text-turn" || rep.AppendOptIn != nil {
		t.Fatalf("-shape public -run text-turn:\n%s", out)
	}
	rep, out = run(t, conformance.Config{URL: url, Shape: conformance.ShapeAppend, Run: regexp.MustCompile(`^append/(text-turn|cancel-suspended)$`)})
	if rep.Passed != 2 || rep.AppendOptIn == nil || !*rep.AppendOptIn {
		t.Fatalf("-shape append:\n%s", out)
	}
	rep, out = run(t, conformance.Config{URL: url, Shape: "diagonal"})
	if rep.Failed != 1 || !strings.Contains(out, "shape") {
		t.Fatalf("a bad shape must fail the setup:\n%s", out)
	}
	for _, shape := range []string{conformance.ShapePublic, conformance.ShapeAppend, conformance.ShapeBoth} {
		t.Logf("%s: %d scenarios", shape, len(conformance.Scenarios(shape)))
	}
}

// TestImportsNoServerPackage: the suite is a black box; it imports no package of this module.
func TestImportsNoServerPackage(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	const module = "github.com/tetherd/tether"
	seen := false
	for _, pkg := range strings.Fields(string(out)) {
		switch {
		case pkg == module+"/conformance":
			seen = true
		case pkg == module || strings.HasPrefix(pkg, module+"/"):
			t.Errorf("package conformance depends on %s: it must speak raw JSON and import nothing of the server", pkg)
		}
	}
	if !seen {
		t.Fatalf("go list -deps did not list the package itself:\n%s", out)
	}
}
