package chat

import (
	"context"
	"encoding/json"
	"errors"
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
		var props engineProps
		if err := e.getJSON(ctx, e.base+"/props", &props); err != nil {
			continue
		}
		if m.opts.Slots > 0 && props.TotalSlots > 0 && m.opts.Slots > props.TotalSlots {
			return fmt.Errorf("-upstream-slots %d: the engine at %s has %d slots (llama-server -np)", m.opts.Slots, e.base, props.TotalSlots)
		}
		e.slotsChecked.Store(true)
		m.defaultsMu.Lock()
		if n := props.Defaults.NCtx; n > 0 && (m.slotContext == 0 || n < m.slotContext) {
			m.slotContext = n
		}
		if m.temperature == nil {
			m.temperature, m.topP = float32Value(props.Defaults.Params.Temperature), float32Value(props.Defaults.Params.TopP)
		}
		m.defaultsMu.Unlock()
	}
	return nil
}

// SlotContext returns the context of one engine slot in tokens (llama.cpp's GET /props,
// default_generation_settings.n_ctx: llama-server's -c divided by -np, capped by the model's
// trained context): the longest conversation one rollout can hold there. With several
// replicas it is the smallest; 0 when Probe learnt none (an engine without /props, or one
// that was down).
func (m *Model) SlotContext() int {
	m.defaultsMu.Lock()
	defer m.defaultsMu.Unlock()
	return m.slotContext
}

// engineProps is what Tether reads of llama.cpp's GET /props.
type engineProps struct {
	TotalSlots int `json:"total_slots"`
	Defaults   struct {
		NCtx   int `json:"n_ctx"` // the context of one slot, in tokens
		Params struct {
			Temperature *float64 `json:"temperature"`
			TopP        *float64 `json:"top_p"`
		} `json:"params"`
	} `json:"default_generation_settings"`
}

// errTooFewSlots is the cause of a step refused by a replica that has fewer slots than
// Options.Slots (checkSlots).
var errTooFewSlots = errors.New("the upstream engine has fewer slots than -upstream-slots (llama-server -np)")

// checkSlots checks, before a step, the slot count of a replica that Probe has not checked
// (it was down at start, or has been down since): llama-server takes an id_slot past its last
// slot as that id modulo its slot count, so two rollouts would share one slot. It returns an
// error wrapping errTooFewSlots when the replica has fewer slots than Options.Slots. A replica
// without /props (404, 405, 501) has nothing to check; one that does not answer it, or answers
// another error, is checked before a later step.
func (e *engine) checkSlots(ctx context.Context) error {
	var props engineProps
	err := e.getJSON(ctx, e.base+"/props", &props)
	var status *statusCodeError
	switch {
	case errors.As(err, &status) && (status.code == http.StatusNotFound || status.code == http.StatusMethodNotAllowed ||
		status.code == http.StatusNotImplemented): // no /props: not llama-server
	case err != nil:
		return nil
	case props.TotalSlots > 0 && props.TotalSlots < e.m.opts.Slots:
		return fmt.Errorf("%w: it has %d, -upstream-slots is %d", errTooFewSlots, props.TotalSlots, e.m.opts.Slots)
	}
	e.slotsChecked.Store(true)
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
		return &statusCodeError{resp.StatusCode, fmt.Sprintf("GET %s: HTTP %d: %s", url, resp.StatusCode, upstreamMessage(resp.Body))}
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v)
}

// statusCodeError is getJSON's error for an answer other than 200.
type statusCodeError struct {
	code int
	msg  string
}

func (e *statusCodeError) Error() string { return e.msg }

// float32Value rounds an engine's float32 setting sent as a float64 (0.800000011920929) to the
// shortest decimal that is the same float32 (0.8).
func float32Value(v *float64) *float64 {
	if v == nil {
		return nil
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(*v, 'g', -1, 32), 64)
	return &r
}
