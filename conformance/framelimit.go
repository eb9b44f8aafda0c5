package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"time"
)

// frameLimit is what the suite knows of the server's frame limit: the limit in bytes and
// where it came from, or why it is unknown (limit 0).
type frameLimit struct {
	limit   int64
	source  string // FrameLimitFlag or FrameLimitServer
	unknown string // why the limit is unknown, when it is
}

// The values of Report.MaxFrameSource.
const (
	// FrameLimitFlag: the limit is Config.MaxFrame (tether conform -max-frame).
	FrameLimitFlag = "config"
	// FrameLimitServer: the limit is the one the server named in its 413 answer to a POST
	// whose declared body is over any limit (see Config.MaxFrame).
	FrameLimitServer = "server"
)

// probeLength is the body length the probe declares: more than any server's frame limit.
const probeLength = 1 << 40

// probeWait bounds the probe: a server that refuses a declared body over its limit does so
// as soon as it has read the request's headers.
const probeWait = 10 * time.Second

// limitSentence finds the limit in the message of the server's 413 answer, as Tether words
// it ("The request body exceeds the limit of 33554432 bytes.").
var limitSentence = regexp.MustCompile(`exceeds the limit of ([0-9]+) bytes`)

// errBodyWanted is the probe's body's read error: the server asked for the body (or did not
// answer within the wait) instead of refusing it, and the probe sends none.
var errBodyWanted = errors.New("the server asked for the body instead of refusing its declared length")

// frameLimit returns the server's frame limit: Config.MaxFrame when set, else the one the
// server names in its answer to the probe, asked once per Run.
func (r *runner) frameLimit(ctx context.Context) frameLimit {
	if r.limit != nil {
		return *r.limit
	}
	fl := frameLimit{limit: r.cfg.MaxFrame, source: FrameLimitFlag}
	if fl.limit <= 0 {
		fl = r.probeFrameLimit(ctx)
	}
	r.limit = &fl
	return fl
}

// probeFrameLimit POSTs to /responses a request that declares a body of probeLength bytes
// with "Expect: 100-continue" and sends none of it: a server that checks the length before
// reading (Tether does) answers 413 at once, and Tether's message names its limit, which is
// its WebSocket frame limit too (-max-frame bounds both). Nothing of the body is ever sent:
// if the server asks for it, or does not answer within probeWait, the request is abandoned
// and the limit is unknown.
func (r *runner) probeFrameLimit(ctx context.Context) frameLimit {
	wait := min(r.cfg.Timeout, probeWait)
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.httpBase+"/responses", refuseBody{})
	if err != nil {
		return frameLimit{unknown: err.Error()}
	}
	req.ContentLength = probeLength
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Expect", "100-continue")
	if r.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.cfg.APIKey)
	}
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, ExpectContinueTimeout: wait}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return frameLimit{unknown: fmt.Sprintf("a POST declaring a %d-byte body got no refusal: %v", int64(probeLength), err)}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		return frameLimit{unknown: fmt.Sprintf("a POST declaring a %d-byte body was answered %d, not 413", int64(probeLength), resp.StatusCode)}
	}
	f, err := decodeFrame(raw)
	m := limitSentence.FindStringSubmatch(f.Str("error", "message"))
	if err != nil || m == nil {
		return frameLimit{unknown: fmt.Sprintf("its 413 answer does not name the limit (%s)", clip(string(raw), 200))}
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n <= 0 {
		return frameLimit{unknown: fmt.Sprintf("its 413 answer names no usable limit (%s)", m[1])}
	}
	return frameLimit{limit: n, source: FrameLimitServer}
}

// refuseBody is the probe's body: reading it is an error, so that none of it is sent.
type refuseBody struct{}

func (refuseBody) Read([]byte) (int, error) { return 0, errBodyWanted }
