package responses

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// serverEvent holds the fields of an upstream server event that the backend reads; the rest of the frame is ignored.
type serverEvent struct {
	Type     string          `json:"type"`
	Delta    string          `json:"delta"`
	Item     *eventItem      `json:"item"`
	Response *eventResponse  `json:"response"`
	Status   int             `json:"status"`
	Error    *upstreamDetail `json:"error"`
	// Code and Message are the flat form of a streaming error event.
	Code    string `json:"code"`
	Message string `json:"message"`
}

type eventItem struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

type eventResponse struct {
	ID                string          `json:"id"`
	Status            string          `json:"status"`
	Usage             *protocol.Usage `json:"usage"`
	Error             *upstreamDetail `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
}

// upstreamDetail is the error object of an error frame or of a failed Response.
type upstreamDetail struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Param   string `json:"param"`
}

// Upstream error codes the backend recovers from.
const (
	codeConnectionLimit  = "websocket_connection_limit_reached"
	codePreviousNotFound = "previous_response_not_found"
)

// UpstreamError is a step's failure reported by the upstream: an error frame (Status is its
// HTTP-equivalent status) or a failed Response (Status 0).
type UpstreamError struct {
	Status  int
	Type    string
	Code    string
	Message string
}

func (e *UpstreamError) Error() string {
	what := "response.failed"
	if e.Status != 0 {
		what = fmt.Sprintf("error %d", e.Status)
	}
	code := e.Code
	if code == "" {
		code = e.Type
	}
	return fmt.Sprintf("upstream %s %s: %s", what, code, e.Message)
}

// incompleteError is a step the upstream ended incomplete for a reason other than
// max_output_tokens (e.g. its shutdown or connection limit).
type incompleteError struct{ reason string }

func (e *incompleteError) Error() string {
	return fmt.Sprintf("upstream response incomplete (reason %q)", e.reason)
}

// Bounds on what an UpstreamError quotes of the upstream's error: the rest is cut, so that an
// upstream cannot pass megabytes of its own text to the client's error message and the log.
const (
	maxUpstreamMessage = 512 // bytes of the message
	maxUpstreamCode    = 64  // bytes of the code and of the type
)

// upstreamError returns the UpstreamError of an upstream's status, type, code and message,
// each cut to its bound.
func upstreamError(status int, typ, code, message string) *UpstreamError {
	return &UpstreamError{Status: status, Type: protocol.Clip(typ, maxUpstreamCode), Code: protocol.Clip(code, maxUpstreamCode),
		Message: protocol.Clip(message, maxUpstreamMessage)}
}

// frameError returns the error of an error frame, nested or flat.
func frameError(ev *serverEvent) *UpstreamError {
	e := upstreamError(ev.Status, "", ev.Code, ev.Message)
	if d := ev.Error; d != nil {
		e = upstreamError(ev.Status, d.Type, d.Code, d.Message)
	}
	if e.Status == 401 || e.Status == 403 {
		// The upstream's message may quote the server's key: never pass it on.
		e.Message = "the upstream refused the server's API key (-upstream-api-key-file): a server configuration error"
	}
	return e
}

// stream turns the events of one upstream step into Output calls.
type stream struct {
	out *sampler.LimitedOutput
	// calls are the upstream's function_calls of the step, in output order: their call_ids
	// and names (the next step maps Tether's call_ids to these).
	calls []string
	// streamed reports that the client has seen output of this step (no transparent retry).
	streamed bool
	// open is the type of the item being streamed, and whether it got deltas.
	open      string
	openDelta bool
}

// event handles one non-terminal event; the error comes from the Output (consumer gone).
func (s *stream) event(ev *serverEvent) error {
	switch ev.Type {
	case "response.output_item.added":
		return s.added(ev.Item)
	case "response.output_text.delta":
		if s.open != protocol.ItemMessage || ev.Delta == "" {
			return nil
		}
		s.openDelta = true
		return s.out.Text(ev.Delta)
	case "response.function_call_arguments.delta":
		if s.open != protocol.ItemFunctionCall || ev.Delta == "" {
			return nil
		}
		s.openDelta = true
		return s.out.Arguments(ev.Delta)
	case "response.output_item.done":
		return s.done(ev.Item)
	}
	return nil
}

// added opens a message or a function_call; other item types are not streamed.
func (s *stream) added(it *eventItem) error {
	s.open, s.openDelta = "", false
	if it == nil {
		return nil
	}
	switch it.Type {
	case protocol.ItemMessage:
		s.open, s.streamed = it.Type, true
		return s.out.Text("")
	case protocol.ItemFunctionCall:
		s.open, s.streamed = it.Type, true
		s.calls = append(s.calls, it.CallID)
		return s.out.Call(it.Name, it.CallID)
	}
	return nil
}

// done streams an item's text or arguments that arrived without deltas.
func (s *stream) done(it *eventItem) error {
	open, had := s.open, s.openDelta
	s.open, s.openDelta = "", false
	if it == nil || had || open != it.Type {
		return nil
	}
	switch it.Type {
	case protocol.ItemMessage:
		for _, p := range it.Content {
			if p.Type == protocol.PartOutputText && p.Text != "" {
				if err := s.out.Text(p.Text); err != nil {
					return err
				}
			}
		}
	case protocol.ItemFunctionCall:
		if it.Arguments != "" {
			return s.out.Arguments(it.Arguments)
		}
	}
	return nil
}

// result is the StepResult of a terminal event, or the step's error.
func result(r *eventResponse, typ string) (sampler.StepResult, error) {
	var res sampler.StepResult
	if r == nil {
		return res, fmt.Errorf("upstream %s without its response", typ)
	}
	if u := r.Usage; u != nil {
		// Counts are the upstream's, taken between 0 and sampler.MaxStepTokens.
		res.InputTokens = sampler.TokenCount(u.InputTokens)
		res.CachedTokens = protocol.CachedTokens(sampler.TokenCount(u.InputTokensDetails.CachedTokens), res.InputTokens)
		res.OutputTokens = sampler.TokenCount(u.OutputTokens)
	}
	switch typ {
	case "response.incomplete":
		reason := ""
		if r.IncompleteDetails != nil {
			reason = r.IncompleteDetails.Reason
		}
		if reason == protocol.ReasonMaxOutputTokens {
			res.Incomplete = reason
			return res, nil
		}
		return res, &incompleteError{reason: protocol.Clip(reason, maxUpstreamCode)}
	case "response.failed":
		ue := &UpstreamError{Code: "server_error", Message: "no error given"}
		if d := r.Error; d != nil {
			ue = upstreamError(0, "", d.Code, d.Message)
		}
		return res, ue
	}
	return res, nil
}

// decodeEvent decodes one upstream frame, in a heavy-work slot when it is large; ctx's error
// when ctx, the step's, ends before one is free.
func decodeEvent(ctx context.Context, data []byte) (*serverEvent, error) {
	release, err := protocol.CPUSlot(ctx, len(data))
	defer release()
	if err != nil {
		return nil, err
	}
	var ev serverEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, fmt.Errorf("upstream sent a malformed frame: %v", err)
	}
	return &ev, nil
}
