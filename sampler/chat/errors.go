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

// CodeContextLengthExceeded is the response.failed error code of a step whose prompt the
// upstream refused as longer than its context window: llama-server's 400 of type
// exceed_context_size_error ("request (N tokens) exceeds the available context size (M
// tokens)"), vLLM's 400 whose message says "maximum context length" ("This model's maximum
// context length is N tokens. However, you requested M tokens (P in the messages, C in the
// completion)…"), or a 400 whose error code is already context_length_exceeded (OpenAI,
// another Tether). It is the code the sim's own context window fails a rollout with, and the code
// OpenAI's API gives an input over a model's context window; param is "input".
const CodeContextLengthExceeded = protocol.ReasonContextLength

// CodeModelNotFound is the response.failed error code of a step the upstream answered 404
// about the model (its error code is model_not_found, or its message names a model): it does
// not serve the request's model (GET /v1/models lists those it does). A 404 that says nothing
// of a model is a path the upstream does not serve (-upstream is not its API base): the step
// fails with server_error saying so.
const CodeModelNotFound = protocol.CodeModelNotFound

// statusError maps an upstream reply other than 200 to the step's error (package doc,
// "Failures"); url is the request's, for a 404 of a path the upstream does not serve.
func statusError(resp *http.Response, url string) error {
	code := resp.StatusCode
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("the upstream engine refused Tether's credentials (HTTP %d): the server's -upstream-api-key-file is wrong or missing", code)
	}
	body := upstreamError(resp.Body)
	msg := body.message
	switch code {
	case http.StatusNotFound: // e.g. vLLM, Ollama and OpenAI answer 404 for a model they lack
		if !body.aboutModel() { // llama-server's "File Not Found", Go's "404 page not found"
			return fmt.Errorf("the upstream engine has no Chat Completions API at POST %s (HTTP 404: %s): "+
				"-upstream must be the engine's OpenAI-compatible API base, e.g. http://127.0.0.1:8080/v1", url, msg)
		}
		return &protocol.Error{Status: http.StatusNotFound, Type: protocol.TypeInvalidRequest, Code: CodeModelNotFound, Param: "model",
			Message: fmt.Sprintf("The upstream engine does not serve this model (HTTP 404): %s", msg)}
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		if body.overContext() {
			return &protocol.Error{Status: http.StatusBadRequest, Type: protocol.TypeInvalidRequest, Code: CodeContextLengthExceeded, Param: "input",
				Message: fmt.Sprintf("The conversation does not fit the upstream engine's context window (HTTP %d): %s. "+
					"Shorten the input or the conversation, or give the engine a larger context per slot.", code, msg)}
		}
		return &protocol.Error{Status: http.StatusBadRequest, Type: protocol.TypeInvalidRequest, Code: CodeInvalidPrompt,
			Message: fmt.Sprintf("The upstream engine rejected the request (HTTP %d): %s", code, msg)}
	}
	return fmt.Errorf("the upstream engine failed (HTTP %d): %s", code, msg)
}

// upstreamMessage reads an error body: OpenAI's {"error":{"message"}}, a bare JSON string or
// text, cut to 512 bytes.
func upstreamMessage(body io.Reader) string { return upstreamError(body).message }

// errorBody is what Tether reads of an upstream's error reply: its message (cut to 512
// bytes, "(no message)" when it has none), and the type and code of an OpenAI-style
// {"error":{…}} envelope ("" otherwise; a numeric code, as llama.cpp sends, is "").
type errorBody struct {
	message, typ, code string
}

// overContext reports whether the upstream refused the prompt as longer than its context
// window: llama.cpp's error type exceed_context_size_error, the code context_length_exceeded
// (OpenAI, another Tether), or a message saying "maximum context length" (vLLM, whose 400 is
// {"error":{"message":"This model's maximum context length is N tokens. However, you
// requested …","type":"BadRequestError","param":null,"code":400}}: its code is the status,
// and it counts the requested completion in the window too).
func (b errorBody) overContext() bool {
	return b.typ == "exceed_context_size_error" || b.code == CodeContextLengthExceeded ||
		strings.Contains(strings.ToLower(b.message), "maximum context length")
}

// aboutModel reports whether a 404 is about the request's model: its code is
// model_not_found (OpenAI), or its message names a model (vLLM's "The model `x` does not
// exist.", Ollama's "model \"x\" not found").
func (b errorBody) aboutModel() bool {
	return b.code == CodeModelNotFound || strings.Contains(strings.ToLower(b.message), "model")
}

// upstreamError reads an error body: OpenAI's {"error":{"message","type","code"}}, a bare
// JSON string or text.
func upstreamError(body io.Reader) errorBody {
	b, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	var env chatwire.ErrorEnvelope
	if json.Unmarshal(b, &env) == nil && env.Error != nil && env.Error.Message != "" {
		var code string
		_ = json.Unmarshal(env.Error.Code, &code) // a number or null leaves it ""
		return errorBody{message: cut(env.Error.Message), typ: env.Error.Type, code: code}
	}
	var s string
	if json.Unmarshal(b, &s) == nil && s != "" {
		return errorBody{message: cut(s)}
	}
	if t := strings.TrimSpace(string(b)); t != "" {
		return errorBody{message: cut(t)}
	}
	return errorBody{message: "(no message)"}
}

// cut shortens an engine's text before a client sees it: 512 bytes at most (docs/chat.md).
func cut(s string) string { return protocol.Clip(s, 512) }
