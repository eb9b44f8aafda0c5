package conformance

// The scenarios that run once through both shapes.

import "fmt"

// equivalent runs the same rollout through the public and the append shape: the same items
// modulo ids and segmenting, the same answer, the same context fingerprint, the same token
// counts.
func equivalent(build func(t *T) M) func(*T) {
	return func(t *T) {
		req := build(t)
		pub := t.dialShape(shapePublic, nil, "").rollout(req, nil)
		app := t.dialShape(shapeAppend, nil, "").rollout(req, nil)
		t.checkCompleted(pub.Last())
		t.checkCompleted(app.Last())
		t.sameRollouts("public", pub, "append", app)
		var in, out int
		for _, tu := range pub.Turns {
			in += tu.Usage("input_tokens")
			out += tu.Usage("output_tokens")
		}
		ain, aout := app.Last().Usage("input_tokens"), app.Last().Usage("output_tokens")
		t.check(in == ain && out == aout, "token counts differ: public segments sum to %d in / %d out, the append rollout has %d / %d", in, out, ain, aout)
	}
}

// equivalentContinuation: a rollout with a tool call, then a second one continuing it by
// previous_response_id, through both shapes: the second sees the same context (public: the
// latest response resumed in place; append: the ended rollout's chain rebuilt).
func equivalentContinuation(t *T) {
	run := func(shape string) *Rollout {
		p := t.dialShape(shape, nil, "")
		first := p.rollout(t.create("Remember the code word: cobalt.", M{"store": false, "tools": []any{shellTool}}), nil)
		return p.rollout(t.create("What is the code word?", M{"store": false, "tools": []any{shellTool}, "previous_response_id": first.Last().ID}), nil)
	}
	pub, app := run(shapePublic), run(shapeAppend)
	t.checkCompleted(pub.Last())
	t.checkCompleted(app.Last())
	t.sameRollouts("public", pub, "append", app)
}

// crossShapeStore: a store:true response of one shape is continued by previous_response_id
// through the other shape, on a new connection.
func crossShapeStore(t *T) {
	for _, from := range []string{shapePublic, shapeAppend} {
		to := shapeAppend
		if from == shapeAppend {
			to = shapePublic
		}
		first := fmt.Sprintf("Remember the %s word: amber.", from)
		parent := t.dialShape(from, nil, "").rollout(t.create(first, M{"store": true, "tools": []any{shellTool}}), nil).Last()
		t.checkCompleted(parent)
		tu := t.dialShape(to, nil, "").start(t.create("Which word?", M{"previous_response_id": parent.ID}))
		t.checkCompleted(tu)
		t.check(tu.Response().Str("previous_response_id") == parent.ID, "previous_response_id is not echoed")
		if t.sim("the answer quotes the parent stored by the other shape") {
			t.checkQuotes(tu.Text(), first)
		}
	}
}

// sameRollouts compares two rollouts of the same request: items modulo ids, answer,
// fingerprint.
func (t *T) sameRollouts(na string, a *Rollout, nb string, b *Rollout) {
	ia, ib := canonicalItems(a.Items), canonicalItems(b.Items)
	if !sameJSON(ia, ib) {
		t.fail(&Failure{Message: fmt.Sprintf("the %s and %s rollouts differ in their items (ids ignored); expected is %s, received is %s", na, nb, na, nb),
			Expected: clip(compact(ia), 1200), Received: clip(compact(ib), 1200)})
	}
	fa, fb := fingerprint(a.Text()), fingerprint(b.Text())
	t.check(fa != "" && fa == fb, "context fingerprints differ: %s %q, %s %q", na, fa, nb, fb)
	if a.Text() != b.Text() {
		t.fail(&Failure{Message: "the answers differ", Expected: na + ": " + clip(a.Text(), 600), Received: nb + ": " + clip(b.Text(), 600)})
	}
}

// canonicalItems strips ids and numbers call_ids by order of appearance.
func canonicalItems(its []Frame) []any {
	calls := map[string]string{}
	out := make([]any, 0, len(its))
	for _, it := range its {
		m := map[string]any{}
		for k, v := range it {
			m[k] = v
		}
		delete(m, "id")
		if c, ok := m["call_id"].(string); ok {
			if calls[c] == "" {
				calls[c] = fmt.Sprintf("call#%d", len(calls)+1)
			}
			m["call_id"] = calls[c]
		}
		out = append(out, m)
	}
	return out
}
