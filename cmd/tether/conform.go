package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/tetherd/tether/conformance"
)

// errConformance is returned when a scenario failed (exit status 1).
var errConformance = errors.New("conformance failures")

// anyContractTimeout is conform's default wait for each answer with -model-contract any: a real
// model behind the server is much slower than the sim.
const anyContractTimeout = 2 * time.Minute

// conformTimeout is the wait for each answer: set when the flag set it, else the contract's
// default.
func conformTimeout(contract string, set time.Duration) time.Duration {
	switch {
	case set > 0:
		return set
	case contract == conformance.ContractSim:
		return conformance.DefaultTimeout
	}
	return anyContractTimeout
}

// conform runs the conformance suite against a server (package conformance). The scenario lines
// go to stdout, or to stderr with -json, which writes the report to stdout.
func conform(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("conform", "Run the conformance suite against a server (public and append shape).", stderr)
	var (
		cfg      conformance.Config
		run      string
		asJSON   bool
		maxFrame byteSize
	)
	fs.StringVar(&cfg.URL, "url", "http://127.0.0.1:8787/v1", urlForms)
	fs.StringVar(&cfg.Shape, "shape", conformance.ShapeBoth, "protocol shapes to test: public, append or both")
	fs.StringVar(&cfg.Contract, "model-contract", conformance.ContractSim,
		"sim: the server is Tether with its sim model (exact counts, quotes, fingerprints); any: only what every server must do")
	fs.StringVar(&run, "run", "", "run only the scenarios whose name (e.g. append/tools-5) matches this regular expression")
	fs.BoolVar(&asJSON, "json", false, "write a JSON report to stdout (the scenario lines go to stderr)")
	fs.StringVar(&cfg.APIKey, "api-key", "", "sent as Authorization: Bearer <key>")
	fs.StringVar(&cfg.Model, "model", conformance.DefaultModel, "the model of every request")
	fs.StringVar(&cfg.SchemaFile, "schema", "", "validate events and Responses against this Open Responses OpenAPI file")
	fs.Var(&maxFrame, "max-frame", "the server's frame limit (e.g. 32MiB); 0 asks the server (Tether names it in its 413 answer to a body declared over it, none of which is sent) and skips the oversize scenarios, saying why, when it does not tell")
	fs.BoolVar(&cfg.SerialLanes, "serial-lanes", false, "the server runs a connection's lanes one after another (e.g. Tether on the responses backend): skip the lane-concurrency checks")
	fs.DurationVar(&cfg.Timeout, "timeout", 0, fmt.Sprintf("how long to wait for each answer of the server; 0 means %v with -model-contract sim, %v with any (a real model writes until max_output_tokens or its context fills, which can take a minute on a slow engine)",
		conformance.DefaultTimeout, anyContractTimeout))
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	su, err := parseServerURL("-url", cfg.URL)
	if err != nil {
		return err
	}
	cfg.URL = su.API()
	if run != "" {
		re, err := regexp.Compile(run)
		if err != nil {
			return fmt.Errorf("-run: %w", err)
		}
		cfg.Run = re
	}
	if cfg.Timeout < 0 {
		return fmt.Errorf("%w: conform: -timeout: want 0 or more, got %v", errUsage, cfg.Timeout)
	}
	if cfg.Contract != conformance.ContractSim && cfg.Contract != conformance.ContractAny {
		return fmt.Errorf("%w: conform: -model-contract %q: want %s or %s", errUsage, cfg.Contract, conformance.ContractSim, conformance.ContractAny)
	}
	cfg.Timeout = conformTimeout(cfg.Contract, cfg.Timeout)
	cfg.MaxFrame = int64(maxFrame)
	out := stdout
	if asJSON {
		out = stderr
	}
	start := time.Now()
	rep := conformance.Run(ctx, cfg, out)
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	}
	if !rep.OK() {
		return fmt.Errorf("%w: %d of %d scenarios failed (%v)", errConformance, rep.Failed, len(rep.Results), time.Since(start).Round(time.Millisecond))
	}
	return nil
}
