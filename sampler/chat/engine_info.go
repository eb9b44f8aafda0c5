package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/tetherd/tether/protocol"
)

// Models implements sampler.Lister: the model ids the first reachable replica lists at
// GET /v1/models, or only Options.Model when it is set (every request then names it).
func (m *Model) Models(ctx context.Context) ([]string, error) {
	if m.opts.Model != "" {
		return []string{m.opts.Model}, nil
	}
	var last error
	for _, e := range m.engines {
		var list struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if last = e.getJSON(ctx, e.url[:len(e.url)-len("/chat/completions")]+"/models", &list); last != nil {
			continue
		}
		ids := make([]string, 0, len(list.Data))
		for _, d := range list.Data {
			ids = append(ids, d.ID)
		}
		return ids, nil
	}
	return nil, last
}

// Probe asks each replica what it tells of itself (llama.cpp GET /props) and returns an error
// when Options.Slots exceeds a replica's slot count (total_slots). It also learns the engine's
// default temperature and top_p, which CheckRequest then fills in for requests that leave them
// unset, so that the echoed Response says what the engine used. A replica that does not
// answer /props (vLLM, OpenAI, one that is down now) is not checked.
func (m *Model) Probe(ctx context.Context) error {
	for _, e := range m.engines {
		var props struct {
			TotalSlots int `json:"total_slots"`
			Defaults   struct {
				Params struct {
					Temperature *float64 `json:"temperature"`
					TopP        *float64 `json:"top_p"`
				} `json:"params"`
			} `json:"default_generation_settings"`
		}
		if err := e.getJSON(ctx, e.base+"/props", &props); err != nil {
			continue
		}
		if m.opts.Slots > 0 && props.TotalSlots > 0 && m.opts.Slots > props.TotalSlots {
			return fmt.Errorf("-upstream-slots %d: the engine at %s has %d slots (llama-server -np)", m.opts.Slots, e.base, props.TotalSlots)
		}
		m.defaultsMu.Lock()
		if m.temperature == nil {
			m.temperature, m.topP = float32Value(props.Defaults.Params.Temperature), float32Value(props.Defaults.Params.TopP)
		}
		m.defaultsMu.Unlock()
	}
	return nil
}

// Unreachable returns the replicas whose health check (probe) does not answer 200 now (their steps
// will fail, or move to another replica, until they are up), for a warning at start.
func (m *Model) Unreachable(ctx context.Context) []string {
	var down []string
	for _, e := range m.engines {
		if !e.probe(ctx) {
			down = append(down, e.base)
		}
	}
	return down
}

// fillDefaults sets the engine's default temperature and top_p (learnt by Probe) on a request
// that leaves them unset.
func (m *Model) fillDefaults(p *protocol.CreateParams) {
	m.defaultsMu.Lock()
	defer m.defaultsMu.Unlock()
	if p.Temperature == nil && m.temperature != nil {
		t := *m.temperature
		p.Temperature = &t
	}
	if p.TopP == nil && m.topP != nil {
		t := *m.topP
		p.TopP = &t
	}
}

// getJSON GETs url from the replica and decodes its JSON answer into v.
func (e *engine) getJSON(ctx context.Context, url string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	e.m.authorize(req)
	resp, err := e.m.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d: %s", url, resp.StatusCode, upstreamMessage(resp.Body))
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v)
}

// float32Value rounds an engine's float32 setting sent as a float64 (0.800000011920929) to the
// shortest decimal that is the same float32 (0.8).
func float32Value(v *float64) *float64 {
	if v == nil {
		return nil
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(*v, 'g', -1, 32), 64)
	return &r
}
