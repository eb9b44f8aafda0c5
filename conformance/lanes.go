package conformance

// How a Peer reads the lanes (stream_id) of one connection: each named
// lane is its own stream of events, checked by its own Grammar; the default lane's events
// carry no stream_id and go to the connection's Grammar.

// grammar is the Grammar of lane ("" is the default lane), created on first use.
func (p *Peer) grammar(lane string) *Grammar {
	if lane == "" {
		return p.g
	}
	g := p.lanes[lane]
	if g == nil {
		if p.lanes == nil {
			p.lanes = map[string]*Grammar{}
		}
		g = newGrammar(p.shape, p.t.ids)
		p.lanes[lane] = g
	}
	return g
}

// stateOf is the grammar state of response id, in whichever lane it was created (nil if
// unknown).
func (p *Peer) stateOf(id string) *rstate {
	if r := p.g.state(id); r != nil {
		return r
	}
	for _, g := range p.lanes {
		if r := g.state(id); r != nil {
			return r
		}
	}
	return nil
}

// inLane runs fn with the Peer reading only the frames of lane ("" the default lane): frames
// of other lanes that arrive meanwhile are checked and held, in arrival order, for later
// reads.
func (p *Peer) inLane(lane string, fn func()) {
	prev := p.within
	p.within = &lane
	defer func() { p.within = prev }()
	fn()
}

// takeHeld removes and returns the first held frame the Peer may read now: of the lane it
// reads within, or any, in arrival order.
func (p *Peer) takeHeld() (Frame, bool) {
	for i, f := range p.held {
		if p.within == nil || f.Str("stream_id") == *p.within {
			p.held = append(p.held[:i], p.held[i+1:]...)
			return f, true
		}
	}
	return nil, false
}

// heldTerminal reports whether a held frame is the terminal event of lane's responses.
func (p *Peer) heldTerminal(lane string) bool {
	for _, f := range p.held {
		if f.Str("stream_id") == lane && isTerminal(f.Type()) {
			return true
		}
	}
	return false
}

// lane is the stream_id of the create that started tu's chain ("" for the default lane).
func (tu *Turn) lane() string { s, _ := tu.req["stream_id"].(string); return s }

// inLane returns create on lane (a copy with stream_id set).
func inLane(lane string, create M) M {
	m := M{}
	for k, v := range create {
		m[k] = v
	}
	m["stream_id"] = lane
	return m
}
