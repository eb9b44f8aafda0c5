package server

import (
	"encoding/json"
	"net/http"

	"github.com/tetherd/tether/protocol"
)

// ModelInfo is one model of GET /v1/models, in the shape of OpenAI's Model object
// (reference: GET /v1/models).
type ModelInfo struct {
	// ID is the name a request's "model" field uses.
	ID string `json:"id"`
	// Object is always "model".
	Object string `json:"object"`
	// Created is the model's creation time in Unix seconds (0 when unknown).
	Created int64 `json:"created"`
	// OwnedBy names the model's owner.
	OwnedBy string `json:"owned_by"`
}

// SimModels is the list GET /v1/models answers for the sim model: one model, "sim". The sim
// itself answers every model name; clients that check the list find "sim" in it.
var SimModels = []ModelInfo{{ID: "sim", Object: "model", Created: 0, OwnedBy: "tether"}}

// models returns the server's model list: Options.Models, or SimModels when it is nil.
func (s *Server) models() []ModelInfo {
	if s.opts.Models != nil {
		return s.opts.Models
	}
	return SimModels
}

// listModels answers GET /v1/models: {"object":"list","data":[Model…]}.
func (s *Server) listModels(w http.ResponseWriter, _ *http.Request, _ string) {
	writeModelsJSON(w, struct {
		Object string      `json:"object"`
		Data   []ModelInfo `json:"data"`
	}{"list", s.models()})
}

// getModel answers GET /v1/models/{model}: the Model object, or 404 model_not_found.
func (s *Server) getModel(w http.ResponseWriter, r *http.Request, _ string) {
	id := r.PathValue("model")
	for _, m := range s.models() {
		if m.ID == id {
			writeModelsJSON(w, m)
			return
		}
	}
	writeHTTPError(w, protocol.Errorf(http.StatusNotFound, "model_not_found", "model",
		"The model '%s' does not exist on this server (GET /v1/models lists them).", id))
}

func writeModelsJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeHTTPError(w, protocol.Errorf(http.StatusInternalServerError, protocol.CodeServerError, "", "Could not encode the model list."))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}
