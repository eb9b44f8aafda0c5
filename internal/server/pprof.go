package server

import (
	"net/http/pprof"
)

// routeOps registers the operator routes: GET /v1/models and /v1/models/{model}, and, with
// Options.Pprof, /debug/pprof/ (behind the API keys like every route but /healthz).
func (s *Server) routeOps() {
	s.mux.HandleFunc("GET /v1/models", s.auth(s.listModels))
	s.mux.HandleFunc("GET /v1/models/{model}", s.auth(s.getModel))
	if !s.opts.Pprof {
		return
	}
	s.mux.HandleFunc("/debug/pprof/", pprof.Index)
	s.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	s.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	s.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	s.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
