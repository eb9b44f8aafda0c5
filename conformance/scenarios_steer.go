package conformance

import "strings"

// Steering scenarios: public shape only.

// steerInterrupt: a steer sent while a response streams is accepted
// (response.steer.accepted, in that response's sequence), the response ends
// response.incomplete with reason steered, and a successor response — previous_response_id the
// steered one — continues with the steer's input (the sim quotes it).
func steerInterrupt(t *T) {
	p := t.dial()
	create := t.create("Write a long essay about rivers.", M{"metadata": meta("sim.speed", "1000", "sim.answer_tokens", "4000")})
	p.send(create)
	created := p.expectEvent("response.created", nil)
	id := created.Str("response", "id")
	p.until("the first output_text.delta of "+id, func(f Frame) bool { return f.Type() == "response.output_text.delta" })
	p.send(M{"type": "response.steer", "previous_response_id": id, "input": "Mention the mineral zircon."})
	fs := p.until("the terminal event of "+id, func(f Frame) bool { return isTerminal(f.Type()) && f.Str("response", "id") == id })
	var accepted Frame
	for _, f := range fs {
		switch {
		case f.Type() == "response.steer.accepted":
			accepted = f
		case contains(f, M{"type": "response.steer.failed", "error": M{"code": "steering_not_supported"}}):
			t.Skipf("the server's model does not steer (steering_not_supported)")
		}
	}
	end := fs[len(fs)-1]
	if accepted == nil || !contains(accepted, M{"steer": M{"previous_response_id": id}}) || !strings.HasPrefix(accepted.Str("steer", "id"), "steer_") {
		t.Fatalf("no response.steer.accepted {steer: {id, previous_response_id: %s}} before the steered response ended", id)
	}
	if !contains(end, M{"type": "response.incomplete", "response": M{"incomplete_details": M{"reason": "steered"}}}) {
		p.fail("the steered response did not end incomplete (steered)", `{"type":"response.incomplete","response":{"incomplete_details":{"reason":"steered"}}}`, clip(show(end, p.lastRaw), 800))
	}
	succ := p.expectEvent("response.created", M{"response": M{"previous_response_id": id}})
	tu := p.stopOf(succ.Str("response", "id"), create)
	t.checkCompleted(tu)
	if t.sim("the successor's answer quotes the steer's input") {
		t.checkQuotes(tu.Text(), "Mention the mineral zircon.")
	}
	p.stillUsable()
}

// steerFailures: steers that cannot be taken get response.steer.failed with the reference's
// codes (invalid_request_error), and the connection stays usable.
func steerFailures(t *T) {
	p := t.dial()
	done := p.start(t.create("Hello.", nil))
	cases := []struct {
		frame M
		code  string
	}{
		{M{"type": "response.steer", "previous_response_id": "resp_unknown", "input": "x"}, "response_not_found"},
		{M{"type": "response.steer", "previous_response_id": done.ID, "input": "x"}, "response_already_completed"},
		{M{"type": "response.steer", "previous_response_id": done.ID, "input": []any{M{"type": "message", "role": "assistant", "content": "x"}}}, "invalid_input"},
		{M{"type": "response.steer", "input": "x"}, "invalid_input"},
	}
	for _, c := range cases {
		p.send(c.frame)
		p.expectEvent("response.steer.failed", M{"error": M{"type": "invalid_request_error", "code": c.code}})
	}
	p.stillUsable()
}
