package client

func benchRollout() *Rollout { return &Rollout{state: stSampling, notify: make(chan struct{}, 1)} }
