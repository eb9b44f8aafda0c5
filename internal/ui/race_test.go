package ui

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/bench"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler/sim"
)

type apiError struct {
	Error struct {
		Code    string  `json:"code"`
		Param   *string `json:"param"`
		Message string  `json:"message"`
	} `json:"error"`
}

// TestRace runs a small race and checks the stream against the final report: every measured
// turn streamed is the report's, in order, and the done event carries the same report as GET.
func TestRace(t *testing.T) {
	_, url := start(t, server.Options{}, 0)
	var none apiError
	if code := call(t, "GET", url+"/ui/api/race", "", "", &none); code != 404 {
		t.Fatalf("GET before any race: %d", code)
	}
	var st RaceState
	if code := call(t, "POST", url+"/ui/api/race", "", `{"speed":"4000","calls":3}`, &st); code != 202 || st.Status != RaceRunning {
		t.Fatalf("start: %d %+v", code, st)
	}
	if st.Config.Rollouts != 1 || st.Config.ToolOutputBytes != 2048 || len(st.Config.Transports) != 4 {
		t.Errorf("defaults %+v", st.Config)
	}
	var busy apiError
	if code := call(t, "POST", url+"/ui/api/race", "", `{}`, &busy); code != 409 || busy.Error.Code != "race_in_progress" {
		t.Fatalf("second start: %d %+v", code, busy)
	}
	evs := events(t, url, "")
	if evs[0].Type != "race" || evs[len(evs)-1].Type != "done" {
		t.Fatalf("stream from %s to %s", evs[0].Type, evs[len(evs)-1].Type)
	}
	var done RaceState
	if err := json.Unmarshal(evs[len(evs)-1].Data, &done); err != nil {
		t.Fatal(err)
	}
	var got RaceState
	if code := call(t, "GET", url+"/ui/api/race", "", "", &got); code != 200 || got.Status != RaceDone || got.ID != st.ID {
		t.Fatalf("GET after: %d %s %s", code, got.Status, got.Error)
	}
	a, _ := json.Marshal(done.Report)
	b, _ := json.Marshal(got.Report)
	if string(a) != string(b) || done.SVG != got.SVG || !strings.Contains(got.SVG, "<svg") {
		t.Fatal("the done event and GET /ui/api/race disagree")
	}
	rep := got.Report
	if rep.Mode != "realtime" || rep.RealtimeSpeed != "4000" || len(rep.Transports) != 4 || rep.Workload.Turns != 4 {
		t.Fatalf("report %s %s %d transports, %d turns", rep.Mode, rep.RealtimeSpeed, len(rep.Transports), rep.Workload.Turns)
	}
	streamed := map[string][]bench.TurnSample{}
	lanes := map[string]string{}
	for _, e := range evs {
		switch e.Type {
		case "turn":
			var te TurnEvent
			if err := json.Unmarshal(e.Data, &te); err != nil {
				t.Fatal(err)
			}
			if te.Rollout > 0 {
				streamed[te.Transport] = append(streamed[te.Transport], te.TurnSample)
			}
			model := sim.Speed4000.Cost().Duration(te.PrefillTokens, 0)
			if te.ModelFirstMS != float64(model)/float64(time.Millisecond) || te.ServerMS != te.OverheadMS-te.ModelFirstMS || te.ServerMS < 0 {
				t.Errorf("%s turn %d: first item %vms, model %vms, server %vms", te.Transport, te.Turn, te.OverheadMS, te.ModelFirstMS, te.ServerMS)
			}
		case "lane":
			var le LaneEvent
			_ = json.Unmarshal(e.Data, &le)
			lanes[le.Transport] = le.Status
		}
	}
	for i, tr := range rep.Transports {
		if tr.Name != bench.Transports[i] || lanes[tr.Name] != RaceDone {
			t.Errorf("transport %d: %s, lane %q", i, tr.Name, lanes[tr.Name])
		}
		if len(streamed[tr.Name]) != len(tr.PerTurn) {
			t.Fatalf("%s: %d turns streamed, %d in the report", tr.Name, len(streamed[tr.Name]), len(tr.PerTurn))
		}
		for j := range tr.PerTurn {
			if streamed[tr.Name][j] != tr.PerTurn[j] {
				t.Errorf("%s turn %d: streamed %+v, report %+v", tr.Name, j+1, streamed[tr.Name][j], tr.PerTurn[j])
			}
		}
		if e := tr.E2E["4000"]; !e.Measured || e.RolloutS <= 0 {
			t.Errorf("%s: e2e %+v", tr.Name, e)
		}
	}
	// A late subscriber gets the whole finished race again.
	if again := events(t, url, ""); len(again) != len(evs) {
		t.Errorf("replay: %d events, first time %d", len(again), len(evs))
	}
	// The race is over: a new one may start.
	if code := call(t, "POST", url+"/ui/api/race", "", `{"speed":"4000","calls":1,"transports":["append"]}`, &st); code != 202 {
		t.Fatalf("start after the end: %d", code)
	}
	events(t, url, "")
}

func TestRaceConfigErrors(t *testing.T) {
	_, url := start(t, server.Options{}, 0)
	for _, tc := range []struct{ body, code, param string }{
		{`{"speed":"instant"}`, protocol.CodeInvalidValue, "speed"},
		{`{"speed":"12"}`, protocol.CodeInvalidValue, "speed"},
		{`{"calls":101}`, protocol.CodeInvalidValue, "calls"},
		{`{"calls":-1}`, protocol.CodeInvalidValue, "calls"},
		{`{"rollouts":4}`, protocol.CodeInvalidValue, "rollouts"},
		{`{"tool_output_bytes":1}`, protocol.CodeInvalidValue, "tool_output_bytes"},
		{`{"tool_output_bytes":1048576}`, protocol.CodeInvalidValue, "tool_output_bytes"},
		{`{"transports":["ws","ws"]}`, protocol.CodeInvalidValue, "transports"},
		{`{"transports":["smoke"]}`, protocol.CodeInvalidValue, "transports"},
		{`{"callz":3}`, protocol.CodeInvalidJSON, ""},
		{`{"calls":`, protocol.CodeInvalidJSON, ""},
	} {
		var e apiError
		code := call(t, "POST", url+"/ui/api/race", "", tc.body, &e)
		param := ""
		if e.Error.Param != nil {
			param = *e.Error.Param
		}
		if code != 400 || e.Error.Code != tc.code || param != tc.param || e.Error.Message == "" {
			t.Errorf("%s: %d %+v", tc.body, code, e)
		}
	}
	var e apiError
	if code := call(t, "GET", url+"/ui/api/race/events", "", "", &e); code != 404 {
		t.Errorf("events before any race: %d", code)
	}
	if code := call(t, "DELETE", url+"/ui/", "", "", &e); code != 405 {
		t.Errorf("DELETE /ui/: %d", code)
	}
	if code := call(t, "GET", url+"/ui/api/nothing", "", "", &e); code != 404 || e.Error.Code != "not_found" {
		t.Errorf("unknown API route: %d %+v", code, e)
	}
}

// TestRaceTimeout: a race that cannot finish in time fails with a message that says so.
func TestRaceTimeout(t *testing.T) {
	_, url := start(t, server.Options{}, 300*time.Millisecond)
	if code := call(t, "POST", url+"/ui/api/race", "", `{"speed":"65","calls":5,"transports":["http","append"]}`, nil); code != 202 {
		t.Fatalf("start: %d", code)
	}
	evs := events(t, url, "")
	last := evs[len(evs)-1]
	if last.Type != "error" || !strings.Contains(string(last.Data), "did not finish within 300ms") {
		t.Fatalf("last event %s %s", last.Type, last.Data)
	}
	var st RaceState
	call(t, "GET", url+"/ui/api/race", "", "", &st)
	if st.Status != RaceFailed || st.Report != nil || !strings.Contains(st.Error, "300ms") {
		t.Fatalf("state %+v", st)
	}
}

// TestCloseDuringRace: Close ends a running race (failed) and its streams, and refuses new ones.
func TestCloseDuringRace(t *testing.T) {
	u, url := start(t, server.Options{}, 0)
	if code := call(t, "POST", url+"/ui/api/race", "", `{"speed":"65","calls":50}`, nil); code != 202 {
		t.Fatalf("start: %d", code)
	}
	stream := openEvents(t, url, "")
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		u.Close()
	}()
	evs := readEvents(t, stream)
	<-closed
	if last := evs[len(evs)-1]; last.Type != "error" || !strings.Contains(string(last.Data), "shutting down") {
		t.Fatalf("last event %s %s", last.Type, last.Data)
	}
	var e apiError
	if code := call(t, "POST", url+"/ui/api/race", "", `{}`, &e); code != http.StatusServiceUnavailable {
		t.Fatalf("start after Close: %d %+v", code, e)
	}
}
