// Package simmeta reads the sim model's per-request knobs: the "sim.*" metadata keys (Calls,
// Parallel, Tool, Fail, Speed, AnswerTokens) and the speed preset names. Package sampler/sim
// runs them; a backend that forwards metadata to another Tether (sampler/responses) checks
// them with Check before a response starts, without linking the sim.
//
// Entry points: Parse (the knobs of one request, or an invalid_value error naming the key
// as param "metadata.<key>"), Check, ParseSpeed.
package simmeta
