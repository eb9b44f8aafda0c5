package ui

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/skipnote"
	"github.com/tetherd/tether/sampler/sim"
)

// browser starts headless Chromium (Debian's chromium; .ci/run installs it) and returns a tab.
// Without Chromium the test skips, unless TETHER_REQUIRE_CHROMIUM=1 (CI) makes it fail.
func browser(t *testing.T) context.Context {
	t.Helper()
	var path string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("TETHER_REQUIRE_CHROMIUM") == "1" {
			t.Fatal("chromium is not installed (apt-get install -y chromium) and TETHER_REQUIRE_CHROMIUM=1")
		}
		skipnote.Skip(t, "chromium not found (apt-get install -y chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path),
		chromedp.Flag("headless", "new"), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// within runs actions with a time limit (derived from the tab's context: see chromedp.Run).
func within(t *testing.T, ctx context.Context, d time.Duration, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

type shownCell struct {
	Transport string `json:"transport"`
	Key       string `json:"key"`
	Value     string `json:"value"`
	Text      string `json:"text"`
}

// TestBrowser drives the page in headless Chromium: it starts a race from the form, waits for
// it to end, and checks that every number of the result table and the lanes is the number of
// the JSON report the server produced for that race, shown at the page's precision. Then the
// live view shows a rollout left suspended by another client.
//
// With TETHER_UI_SCREENSHOTS=DIR it races the page's defaults (20 calls at 1,000 tokens/s) and
// saves DIR/ui-race.png and DIR/ui-live.png (the screenshots of docs/ui.md).
func TestBrowser(t *testing.T) {
	tab := browser(t)
	_, url := start(t, server.Options{}, 0)
	shots := os.Getenv("TETHER_UI_SCREENSHOTS")
	speed, calls := "4000", "4"
	if shots != "" {
		speed, calls = "1000", "20"
	}
	within(t, tab, 20*time.Second, "open the page",
		chromedp.Navigate(url+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#start")),
		chromedp.SetValue(chromedp.CSS("#speed"), speed),
		chromedp.SetValue(chromedp.CSS("#calls"), calls),
		chromedp.Click(chromedp.CSS("#start")))
	within(t, tab, 2*time.Minute, "wait for the race to end",
		chromedp.WaitReady(chromedp.CSS(`body[data-race-status="done"]`)))

	var st RaceState
	if code := call(t, "GET", url+"/ui/api/race", "", "", &st); code != 200 || st.Status != RaceDone {
		t.Fatalf("race: %d %s %s", code, st.Status, st.Error)
	}
	rep := st.Report
	if st.Config.Speed != speed || strconv.Itoa(st.Config.Calls) != calls {
		t.Fatalf("the page started %+v, want speed %s, %s calls", st.Config, speed, calls)
	}
	id, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.body.dataset.raceId`))
	if err != nil || id != st.ID {
		t.Fatalf("page race %q, server race %q (%v)", id, st.ID, err)
	}
	cells, err := chromedp.Run(tab, chromedp.Evaluate[[]shownCell](`[...document.querySelectorAll('#results td[data-key], .lane .rollout, .lane .server, .lane .last')].map(el => ({
		transport: el.dataset.transport || el.closest('.lane').dataset.transport,
		key: el.dataset.key || 'lane_' + el.className, value: el.dataset.value, text: el.textContent}))`))
	if err != nil {
		t.Fatal(err)
	}
	sp, err := sim.ParseSpeed(speed)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(rep.Transports) * 8; len(cells) != want {
		t.Fatalf("the page shows %d numbers, want %d: %+v", len(cells), want, cells)
	}
	for _, c := range cells {
		tr := rep.Transports[0]
		for _, x := range rep.Transports {
			if x.Name == c.Transport {
				tr = x
			}
		}
		if tr.Name != c.Transport {
			t.Fatalf("the page shows transport %q, not in the report", c.Transport)
		}
		e := tr.E2E[speed]
		// The lane's server + transport time is its last turn's, as the race streamed it.
		last := turnEvent(tr.Name, 0, sp, time.Now(), tr.PerTurn[len(tr.PerTurn)-1])
		want := map[string]float64{"rollout_s": e.RolloutS, "lane_rollout": e.RolloutS, "ratio_vs_http": e.RatioVsHTTP,
			"overhead_p50_ms": tr.OverheadMS.P50, "overhead_p90_ms": tr.OverheadMS.P90, "bytes_per_turn": tr.BytesPerTurn,
			"lane_server": last.ServerMS, "lane_last": last.OverheadMS}[c.Key]
		unit := map[string]string{"rollout_s": "s", "lane_rollout": "s", "ratio_vs_http": "×",
			"overhead_p50_ms": "ms", "overhead_p90_ms": "ms", "bytes_per_turn": "B", "lane_server": "ms", "lane_last": "ms"}[c.Key]
		got, err := strconv.ParseFloat(c.Value, 64)
		if err != nil || got != want {
			t.Errorf("%s %s: the page holds %q, the report %v", c.Transport, c.Key, c.Value, want)
		}
		if err := shownAs(c.Text, want, unit); err != nil {
			t.Errorf("%s %s: %v", c.Transport, c.Key, err)
		}
	}
	status, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector('#race-status').textContent`))
	if m := regexp.MustCompile(`finished in (\S+ s)\.$`).FindStringSubmatch(status); err != nil || m == nil {
		t.Errorf("status %q (%v)", status, err)
	} else if err := shownAs(m[1], rep.ElapsedS, "s"); err != nil {
		t.Errorf("elapsed: %v", err)
	}
	labels, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll('.lane .label')].map(el => el.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range labels {
		if want := fmt.Sprintf("turn %d / %d", rep.Workload.Turns, rep.Workload.Turns); l != want {
			t.Errorf("lane label %q, want %q", l, want)
		}
	}
	if n, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.querySelectorAll('#chart-svg svg polyline').length`)); err != nil || n != len(rep.Transports)+1 {
		t.Errorf("the bench's chart has %d lines, want %d (%v)", n, len(rep.Transports)+1, err)
	}
	if shots != "" {
		screenshot(t, tab, filepath.Join(shots, "ui-race.png"))
	}

	rid := openRollout(t, url, "")
	if shots != "" { // a slow race in the background fills the live view
		if code := call(t, "POST", url+"/ui/api/race", "", `{"speed":"65","calls":20}`, nil); code != 202 {
			t.Fatalf("background race: %d", code)
		}
		time.Sleep(3 * time.Second)
	}
	within(t, tab, 20*time.Second, "the live view shows the suspended rollout",
		chromedp.Click(chromedp.CSS(`.tab[data-view="live"]`)),
		chromedp.WaitReady(chromedp.CSS(`tr[data-rollout="`+rid+`"] span[data-state="suspended"]`)))
	turns, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector('tr[data-rollout="`+rid+`"] td[data-key="turns"]').textContent`))
	if err != nil || turns != "1" {
		t.Errorf("turns %q (%v)", turns, err)
	}
	if shots != "" {
		screenshot(t, tab, filepath.Join(shots, "ui-live.png"))
	}
}

func screenshot(t *testing.T, tab context.Context, path string) {
	t.Helper()
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

var shownRE = regexp.MustCompile(`^([0-9]+(?:\.([0-9]+))?) ?(µs|ms|s|×|B|KiB|MiB)$`)

// shownAs checks that text is v as the page formats it: the number rounded to the digits
// shown, in the unit shown. v is in the report's unit: "s", "ms", "×" (a ratio) or "B".
func shownAs(text string, v float64, unit string) error {
	m := shownRE.FindStringSubmatch(strings.TrimSpace(text))
	if m == nil {
		return fmt.Errorf("%q is not a number with a unit", text)
	}
	shown, _ := strconv.ParseFloat(m[1], 64)
	scale := map[string]float64{"µs": 0.001, "ms": 1, "s": 1, "×": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20}[m[3]]
	if m[3] == "s" && unit == "ms" {
		scale = 1000
	}
	if (unit == "s" || unit == "ms") != (m[3] == "s" || m[3] == "ms" || m[3] == "µs") {
		return fmt.Errorf("%q is not in a unit of %s", text, unit)
	}
	half := 0.5 * math.Pow(10, -float64(len(m[2]))) * scale
	if d := math.Abs(shown*scale - v); d > half*(1+1e-9) {
		return fmt.Errorf("the page shows %q, the report has %v", text, v)
	}
	return nil
}

// TestBrowserWithKey: on a server with API keys, the page's calls fail with the 401 message
// until the key is typed in its field; then the race runs with it (the event stream too) and
// the live view lists a rollout opened with another client's key.
func TestBrowserWithKey(t *testing.T) {
	tab := browser(t)
	_, url := start(t, server.Options{Keys: server.NewKeys("sk-page", "sk-other")}, 0)
	within(t, tab, 20*time.Second, "start without a key",
		chromedp.Navigate(url+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#start")),
		chromedp.SetValue(chromedp.CSS("#speed"), "4000"),
		chromedp.SetValue(chromedp.CSS("#calls"), "1"),
		chromedp.Click(chromedp.CSS("#start")),
		chromedp.WaitReady(chromedp.CSS("#race-status.failed")))
	msg, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector('#race-status').textContent`))
	if err != nil || !strings.Contains(msg, "API key") {
		t.Fatalf("status without a key: %q (%v)", msg, err)
	}
	within(t, tab, 2*time.Minute, "race with the key",
		chromedp.SetValue(chromedp.CSS("#key"), "sk-page"),
		chromedp.Click(chromedp.CSS("#start")),
		chromedp.WaitReady(chromedp.CSS(`body[data-race-status="done"]`)))
	rid := openRollout(t, url, "sk-other")
	within(t, tab, 20*time.Second, "the live view with the key",
		chromedp.Click(chromedp.CSS(`.tab[data-view="live"]`)),
		chromedp.WaitReady(chromedp.CSS(`tr[data-rollout="`+rid+`"] span[data-state="suspended"]`)))
}
