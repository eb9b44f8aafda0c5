package client

import (
	"encoding/json"
	"slices"
)

// The methods below change a rollout's state for the link's reader; r.mu is held.

// push queues an event or an error for Events and signals the readers. The signal is one
// token in the one-slot channel notify: no allocation per event. A reader that takes the token
// passes it on (signal) while anything is left for another reader to see, so that with two
// readers (a misuse) the one that finds nothing left sees the state the push came with and
// stops, instead of waiting for a token that the other took.
func (r *Rollout) push(ev Event, err error) {
	r.queue = append(r.queue, result{ev, err})
	r.signal()
}

// signal leaves a token in notify unless one is there already. r.mu is held.
func (r *Rollout) signal() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// pop takes the oldest queued result, if any. The queue's array is reused once it has been
// read to its end (or compacted once half of it has been read), so a reader that keeps up
// allocates nothing. r.mu is held.
func (r *Rollout) pop() (result, bool) {
	if r.head == len(r.queue) {
		return result{}, false
	}
	res := r.queue[r.head]
	r.queue[r.head] = result{}
	r.head++
	switch {
	case r.head == len(r.queue):
		r.queue, r.head = r.queue[:0], 0
	case r.head >= 64 && r.head*2 >= len(r.queue):
		n := copy(r.queue, r.queue[r.head:])
		clear(r.queue[n:])
		r.queue, r.head = r.queue[:n], 0
	}
	return res, true
}

// idle reports whether the rollout waits for nothing from the server: suspended (and not
// cancelling), detached or ended. r.mu is held.
func (r *Rollout) idle() bool {
	return (r.state == stSuspended && !r.cancelling) || r.state == stDetached || r.state == stEnded
}

// named reports whether an error message names the rollout's Response or a pending call.
func (r *Rollout) named(msg string) bool {
	if mentions(msg, r.id) {
		return true
	}
	if r.susp != nil {
		for _, c := range r.susp.Calls {
			if mentions(msg, c.CallID) {
				return true
			}
		}
	}
	return false
}

// created records the Response id from response.created.
func (r *Rollout) created(id string) {
	r.id, r.state, r.ended = id, stSampling, false
}

// suspended records response.done (append shape).
func (r *Rollout) suspended(ev Event, pending []string, output []Item, usage *Usage) {
	if usage != nil {
		r.usage = *usage
	}
	r.cur = append(r.cur, output...)
	r.suspend(ev, pending, output)
}

// suspend moves the rollout to stSuspended and queues ev with its Suspension.
func (r *Rollout) suspend(ev Event, pending []string, output []Item) {
	r.state = stSuspended
	for _, it := range output {
		r.history = append(r.history, itemJSON(it))
	}
	s := &Suspension{ResponseID: r.id, Output: output, Usage: r.priorUsage.Add(r.usage)}
	for _, id := range pending {
		c := Call{CallID: id}
		for _, it := range output {
			if it.Type == "function_call" && it.CallID == id {
				c = Call{ID: it.ID, CallID: id, Name: it.Name, Arguments: it.Arguments}
			}
		}
		s.Calls = append(s.Calls, c)
	}
	r.susp = s
	ev.Suspended = s
	r.push(ev, nil)
}

// terminal handles a terminal event (l.mu is held too). It reports whether the rollout ended,
// rather than suspending at a public-shape segment's end or detaching for a reconnect.
func (r *Rollout) terminal(l *link, ev Event) bool {
	resp := ev.Response
	var u Usage
	if resp.Usage != nil {
		u = *resp.Usage
	}
	reason := ""
	if resp.IncompleteDetails != nil {
		reason = resp.IncompleteDetails.Reason
	}
	switch {
	case l.shape == ShapeAppend && r.state == stSuspended && !r.cancelling && l.reconnect &&
		(reason == "connection_limit" || reason == "server_shutdown"):
		r.absorb(resp.Output, u)
		r.state = stDetached
		l.away = true // the server drains this WebSocket: the next request goes to a new one
		return false
	case l.shape == ShapePublic && resp.Status == "completed":
		if calls := functionCalls(resp.Output); len(calls) > 0 {
			r.absorb(resp.Output, u)
			r.suspend(ev, calls, resp.Output)
			return false
		}
	}
	r.usage = u
	merged := *resp
	merged.Output = append(slices.Clone(r.prior), resp.Output...)
	total := r.priorUsage.Add(u)
	merged.Usage = &total
	r.end(ev, &merged)
	return true
}

// absorb records an ended Response of the rollout's chain: its output and usage.
func (r *Rollout) absorb(output []Item, u Usage) {
	r.prior, r.priorUsage = append(r.prior, output...), r.priorUsage.Add(u)
	r.cur, r.usage, r.ended = nil, Usage{}, true
}

// end queues ev as the rollout's last event, with the final Response.
func (r *Rollout) end(ev Event, final *Response) {
	r.state, r.final, r.susp, r.cancelling = stEnded, final, nil, false
	ev.Final = final
	r.push(ev, nil)
}

// endLocally ends a suspended rollout without the server: response.incomplete with reason.
func (r *Rollout) endLocally(reason string) {
	total := r.priorUsage.Add(r.usage)
	final := &Response{ID: r.id, Status: "incomplete", Output: append(slices.Clone(r.prior), r.cur...),
		Usage: &total, IncompleteDetails: &IncompleteDetails{Reason: reason}}
	r.end(Event{Type: "response.incomplete", SequenceNumber: -1, ResponseID: r.id, Response: final}, final)
}

// detachParked detaches the parked rollout from l (l.mu is held too): its next Append, or the
// retry that Events sends, resumes it on a new WebSocket.
func (r *Rollout) detachParked(l *link) {
	if r.state == stSuspended {
		r.state = stDetached
	}
	delete(l.byID, r.id)
	delete(l.all, r)
}

// linkEnded handles the end of the rollout's WebSocket without a terminal event.
func (r *Rollout) linkEnded(reconnect bool, cause error) {
	switch {
	case r.state == stEnded || r.state == stDetached:
	case r.state == stSuspended && r.cancelling:
		r.endLocally("cancelled")
	case r.state == stSuspended && reconnect:
		// No terminal event: the Response was not stored, so a continuation replays.
		r.prior, r.priorUsage = append(r.prior, r.cur...), r.priorUsage.Add(r.usage)
		r.cur, r.usage = nil, Usage{}
		r.state = stDetached
	default:
		r.state, r.susp = stEnded, nil
		r.push(Event{}, cause)
	}
}

// functionCalls returns the call_ids of the function calls in output.
func functionCalls(output []Item) []string {
	var ids []string
	for _, it := range output {
		if it.Type == "function_call" {
			ids = append(ids, it.CallID)
		}
	}
	return ids
}

// itemJSON is an item as it is replayed.
func itemJSON(it Item) json.RawMessage {
	b, _ := json.Marshal(it)
	return b
}
