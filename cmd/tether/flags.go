package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/peterbourgon/ff/v3"
)

var errUsage = errors.New("usage")

func exitCode(err error) int {
	if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
		return 2
	}
	return 1
}

// envPrefix is the prefix of a subcommand's environment variables: TETHER_SERVE, TETHER_BENCH, …
func envPrefix(sub string) string { return "TETHER_" + strings.ToUpper(sub) }

// envName is the environment variable of a subcommand's flag: TETHER_<SUB>_<FLAG>, '-' → '_'
// (the mapping of ff.WithEnvVarPrefix).
func envName(sub, flagName string) string {
	return envPrefix(sub) + "_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// newFlagSet returns the flag set of a subcommand: errors and -h go to stderr, -h lists the
// environment variable of each flag, and every subcommand has -config.
func newFlagSet(sub, summary string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.String("config", "", "read flags from this file: one 'flag value' per line, '#' comments (precedence: flag > environment > file > default)")
	fs.Usage = func() { printUsage(fs, summary) }
	return fs
}

// printUsage writes a subcommand's usage: each flag with its type, environment variable,
// usage text and default.
func printUsage(fs *flag.FlagSet, summary string) {
	w := fs.Output()
	fmt.Fprintf(w, "Usage: tether %s [flags]\n\n%s\n\nFlags (each also set by the environment variable shown, or by a -config file):\n", fs.Name(), summary)
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  -%s %s  $%s\n    \t%s", f.Name, typ, envName(fs.Name(), f.Name), usage)
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// parseFlags sets fs's flags from args, then from the environment variables
// TETHER_<SUB>_<FLAG> of the flags args did not set, then from the -config file for the rest
// (ff.Parse). A bad environment value is an error only if args did not set its flag. Unknown
// TETHER_<SUB>_… variables and positional arguments are usage errors, and so is a numeric flag
// outside its range (checkRanges).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := checkEnv(fs); err != nil {
		return err
	}
	err := ff.Parse(fs, args, ff.WithEnvVarPrefix(envPrefix(fs.Name())),
		ff.WithConfigFileFlag("config"), ff.WithConfigFileParser(ff.PlainParser))
	switch {
	case errors.Is(err, flag.ErrHelp):
		return flag.ErrHelp
	case err != nil:
		return fmt.Errorf("%w: %s: %s", errUsage, fs.Name(), flagError(err))
	case fs.NArg() > 0:
		return fmt.Errorf("%w: %s takes no arguments, got %q (flags go before them; see 'tether %s -h')", errUsage, fs.Name(), fs.Args(), fs.Name())
	}
	return checkRanges(fs)
}

// ffEnvError matches ff.Parse's error for a bad environment value.
var ffEnvError = regexp.MustCompile(`error setting flag "([^"]+)" from environment variable "([^"]+)": (.*)$`)

// flagError rewords an ff.Parse error so that it names the variable, its value and the flag:
// TETHER_BENCH_CALLS="abc": invalid value for -calls: parse error.
func flagError(err error) string {
	if m := ffEnvError.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Sprintf("%s=%q: invalid value for -%s: %s", m[2], os.Getenv(m[2]), m[1], m[3])
	}
	return strings.TrimPrefix(err.Error(), "error parsing commandline arguments: ")
}

// checkEnv rejects environment variables with the subcommand's prefix that name no flag (a
// typo would otherwise be silently ignored), and the old global names TETHER_<FLAG> of the
// subcommand's flags (an operator's TETHER_ADDR would otherwise be silently ignored).
func checkEnv(fs *flag.FlagSet) error {
	known := map[string]bool{}
	legacy := map[string]string{} // TETHER_<FLAG>, read before the names were per command
	fs.VisitAll(func(f *flag.Flag) {
		known[envName(fs.Name(), f.Name)] = true
		legacy["TETHER_"+strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))] = envName(fs.Name(), f.Name)
	})
	var unknown []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if now, ok := legacy[name]; ok && !known[name] {
			return fmt.Errorf("%w: %s is no longer read: each command has its own variables, use %s", errUsage, name, now)
		}
		if strings.HasPrefix(name, envPrefix(fs.Name())+"_") && !known[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return fmt.Errorf("%w: unknown environment variable %s: no flag of 'tether %s' has that name (see 'tether %s -h')",
		errUsage, strings.Join(unknown, ", "), fs.Name(), fs.Name())
}

// byteSize is a flag value in bytes. It accepts a plain number of bytes or a number with a
// unit, fractions allowed: 1.5MiB, 32MiB, 2GiB (powers of 1024), 64MB (powers of 1000).
type byteSize int64

func (b *byteSize) String() string { return formatBytes(int64(*b)) }

// Set parses s (go-humanize.ParseBytes).
func (b *byteSize) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

func parseBytes(s string) (int64, error) {
	n, err := humanize.ParseBytes(strings.TrimSpace(s))
	if err != nil || n > 1<<62 {
		return 0, fmt.Errorf("invalid size %q: want a number of bytes, optionally with a unit such as KiB, MiB, GiB (1.5MiB)", s)
	}
	return int64(n), nil
}

func formatBytes(n int64) string {
	switch {
	case n != 0 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + "GiB"
	case n != 0 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MiB"
	case n != 0 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "KiB"
	}
	return strconv.FormatInt(n, 10)
}
