package chat

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tetherd/tether/internal/chatwire"
	"github.com/tetherd/tether/protocol"
)

// CodeInvalidPrompt is the response.failed error code of a step the upstream refused as a bad
// request (HTTP 400, 413, 422): the client's input or settings, not Tether, caused it.
const CodeInvalidPrompt = "invalid_prompt"

// CodeModelNotFound is the response.failed error code of a step the upstream answered 404: it
// does not serve the request's model (GET /v1/models lists those it does).
const CodeModelNotFound = protocol.CodeModelNotFound

// statusError maps an upstream reply other than 200 to the step's error (package doc,
// "Failures").
func statusError(resp *http.Response) error {
	code := resp.StatusCode
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("the upstream engine refused Tether's credentials (HTTP %d): the server's -upstream-api-key-file is wrong or missing", code)
	}
	msg := upstreamMessage(resp.Body)
	switch code {
	case http.StatusNotFound: // e.g. vLLM, Ollama and OpenAI answer 404 for a model they lack
		return &protocol.Error{Status: http.StatusNotFound, Type: protocol.TypeInvalidRequest, Code: CodeModelNotFound, Param: "model",
			Message: fmt.Sprintf("The upstream engine does not serve this model (HTTP 404): %s", msg)}
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return &protocol.Error{Status: http.StatusBadRequest, Type: protocol.TypeInvalidRequest, Code: CodeInvalidPrompt,
			Message: fmt.Sprintf("The upstream engine rejected the request (HTTP %d): %s", code, msg)}
	}
	return fmt.Errorf("the upstream engine failed (HTTP %d): %s", code, msg)
}

// upstreamMessage reads an error body: OpenAI's {"error":{"message"}}, a bare JSON string or
// text, cut to 512 bytes.
func upstreamMessage(body io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	var env chatwire.ErrorEnvelope
	if json.Unmarshal(b, &env) == nil && env.Error != nil && env.Error.Message != "" {
		return cut(env.Error.Message)
	}
	var s string
	if json.Unmarshal(b, &s) == nil && s != "" {
		return cut(s)
	}
	if t := strings.TrimSpace(string(b)); t != "" {
		return cut(t)
	}
	return "(no message)"
}

// cut shortens an engine's text before a client sees it: 512 bytes at most (docs/chat.md).
func cut(s string) string { return protocol.Clip(s, 512) }
