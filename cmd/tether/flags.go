package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

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
// environment variable of each flag (in groups when groups are given: flags in no group come
// last, under "Other flags"), and every subcommand has -config.
func newFlagSet(sub, summary string, stderr io.Writer, groups ...flagGroup) *flag.FlagSet {
	fs := flag.NewFlagSet(sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.String("config", "", "read flags from this file: one 'flag value' per line, '#' comments (precedence: flag > environment > file > default)")
	fs.Usage = func() { printUsage(fs, summary, groups) }
	return fs
}

// flagGroup is a titled group of flags in a subcommand's -h, listed in the order of names.
type flagGroup struct {
	title string
	names []string
}

// usageWidth is the column at which -h wraps its text.
const usageWidth = 100

// printUsage writes a subcommand's usage: each flag with its type and environment variable on
// one line, then its usage text and default wrapped at usageWidth columns, in groups.
func printUsage(fs *flag.FlagSet, summary string, groups []flagGroup) {
	w := fs.Output()
	fmt.Fprintf(w, "Usage: tether %s [flags]\n\n%s\n\n", fs.Name(), wrap(summary, "", usageWidth))
	fmt.Fprint(w, wrap("Each flag can also be set by the environment variable shown, or by a line 'flag value' in "+
		"the -config file. Precedence: flag > environment > file > default.", "", usageWidth), "\n")
	listed := map[string]bool{}
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, name := range g.names {
			if f := fs.Lookup(name); f != nil && !listed[name] {
				listed[name] = true
				printFlag(w, fs.Name(), f)
			}
		}
	}
	title := "\nFlags:\n"
	if len(groups) > 0 {
		title = "\nOther flags:\n"
	}
	fs.VisitAll(func(f *flag.Flag) {
		if listed[f.Name] {
			return
		}
		fmt.Fprint(w, title)
		title = ""
		printFlag(w, fs.Name(), f)
	})
}

// printFlag writes one flag of printUsage.
func printFlag(w io.Writer, sub string, f *flag.Flag) {
	typ, usage := flag.UnquoteUsage(f)
	switch v := f.Value.(type) {
	case *byteSize:
		typ = "size"
	case *storeQuota:
		typ = "int"
		if v.bytes {
			typ = "size"
		}
	}
	if typ != "" {
		typ = " " + typ
	}
	fmt.Fprintf(w, "  -%s%s  $%s\n", f.Name, typ, envName(sub, f.Name))
	if def := f.DefValue; def != "" && def != "false" && def != "0" && def != "0s" {
		if _, ok := f.Value.(*byteSize); ok && strings.HasSuffix(def, "KiB") {
			if n, err := parseBytes(def); err == nil && n >= 1<<20 { // a computed default: rounded
				def = "about " + strings.ReplaceAll(humanize.IBytes(uint64(n)), " ", "")
			}
		}
		usage += " (default " + def + ")"
	}
	fmt.Fprintln(w, wrap(usage, "        ", usageWidth))
}

// wrap breaks text into lines of at most width columns, each starting with indent; a word
// longer than a line stays whole on a line of its own.
func wrap(text, indent string, width int) string {
	var b strings.Builder
	line := indent
	for _, word := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	b.WriteString(line)
	return b.String()
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
	// The whole help is printed for -h only: a mistake gets one line that points to it.
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard) // the flag package's own copy of the error
	err := ff.Parse(fs, args, ff.WithEnvVarPrefix(envPrefix(fs.Name())),
		ff.WithConfigFileFlag("config"), ff.WithConfigFileParser(configParser(fs)))
	fs.Usage = usage
	fs.SetOutput(out)
	var perr *configError
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage()
		return flag.ErrHelp
	case errors.As(err, &perr):
		return fmt.Errorf("%w: %s: %s", errUsage, fs.Name(), perr.msg)
	case err != nil:
		return fmt.Errorf("%w: %s: %s (see 'tether %s -h')", errUsage, fs.Name(), flagError(fs, err), fs.Name())
	case fs.NArg() > 0:
		return fmt.Errorf("%w: %s takes no arguments, got %q (flags go before them; see 'tether %s -h')", errUsage, fs.Name(), fs.Args(), fs.Name())
	}
	return checkRanges(fs)
}

// configError is a mistake in a -config file, its message naming the file and the line.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

// configParser returns the parser of fs's -config file. The syntax is ff.PlainParser's: one
// 'flag value' per line (the flag's name without a dash, a space, the value; " #" starts a
// trailing comment), lines starting with '#' are comments, and a bare name sets a boolean flag
// to true. Every mistake is a *configError naming the file, the line and the expected form.
func configParser(fs *flag.FlagSet) ff.ConfigFileParser {
	return func(r io.Reader, set func(name, value string) error) error {
		file := fs.Lookup("config").Value.String()
		sc := bufio.NewScanner(r)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || line[0] == '#' {
				continue
			}
			name, value, hasValue := strings.Cut(line, " ")
			if i := strings.IndexByte(name, '\t'); i >= 0 { // a tab separates too
				name, value, hasValue = line[:i], line[i+1:], true
			}
			value = strings.TrimSpace(value)
			if i := strings.Index(value, " #"); i >= 0 {
				value = strings.TrimSpace(value[:i])
			}
			where := fmt.Sprintf("%s:%d", file, n)
			f, msg := checkConfigLine(fs, name, value, hasValue)
			if msg != "" {
				return &configError{where + ": " + msg}
			}
			if !hasValue {
				value = "true"
			}
			if err := set(name, value); err != nil {
				if inner := errors.Unwrap(err); inner != nil {
					err = inner
				}
				return &configError{fmt.Sprintf("%s: invalid value %q for -%s: %v; want 'flag value', e.g. '%s'", where, value, name, err, configExample(f))}
			}
		}
		if err := sc.Err(); err != nil {
			return &configError{fmt.Sprintf("%s: %v", file, err)}
		}
		return nil
	}
}

// checkConfigLine checks the form of one config line: it returns the flag it sets, or a
// message saying what is wrong and what was expected.
func checkConfigLine(fs *flag.FlagSet, name, value string, hasValue bool) (*flag.Flag, string) {
	if k, v, ok := strings.Cut(name, "="); ok {
		if f := fs.Lookup(strings.TrimLeft(k, "-")); f != nil {
			return nil, fmt.Sprintf("%q: want 'flag value' (the name, a space, the value), e.g. '%s %s'", name, f.Name, v)
		}
	}
	if bare := strings.TrimLeft(name, "-"); bare != name {
		if f := fs.Lookup(bare); f != nil {
			return nil, fmt.Sprintf("%q: write the flag's name without a dash, e.g. '%s'", name, strings.TrimSpace(bare+" "+value))
		}
	}
	f := fs.Lookup(name)
	if f == nil {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		return nil, fmt.Sprintf("unknown flag %q%s; want 'flag value' with a flag of 'tether %s -h'", name, didYouMean(name, names), fs.Name())
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !hasValue && !(ok && b.IsBoolFlag()) {
		return nil, fmt.Sprintf("%q has no value; want 'flag value', e.g. '%s'", name, configExample(f))
	}
	return f, ""
}

// configExample is a config line for f: its name and its default, or its type's placeholder.
func configExample(f *flag.Flag) string {
	if f == nil {
		return "addr 127.0.0.1:8787"
	}
	v := f.DefValue
	if v == "" {
		typ, _ := flag.UnquoteUsage(f)
		v = strings.ToUpper(typ)
		if v == "" {
			v = "VALUE"
		}
	}
	return f.Name + " " + v
}

// didYouMean returns ` (did you mean "x"?)` for closest(name, candidates), or "".
func didYouMean(name string, candidates []string) string {
	if c := closest(name, candidates); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

// closest returns the candidate closest to name when it is close enough to be a likely typo
// (an edit distance of at most a third of name's length), or "".
func closest(name string, candidates []string) string {
	best, bestD := "", len(name)/3+1
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(name), strings.ToLower(c)); d < bestD && c != name {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ffEnvError matches ff.Parse's error for a bad environment value.
var ffEnvError = regexp.MustCompile(`error setting flag "([^"]+)" from environment variable "([^"]+)": (.*)$`)

// flagError rewords an ff.Parse error so that it names the variable, its value and the flag:
// TETHER_BENCH_CALLS="abc": invalid value for -calls: parse error.
func flagError(fs *flag.FlagSet, err error) string {
	if m := ffEnvError.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Sprintf("%s=%q: invalid value for -%s: %s", m[2], os.Getenv(m[2]), m[1], m[3])
	}
	msg := strings.TrimPrefix(err.Error(), "error parsing commandline arguments: ")
	if m := undefinedFlag.FindStringSubmatch(msg); m != nil {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if c := closest(m[1], names); c != "" {
			msg += " (did you mean -" + c + "?)"
		}
	}
	if m := badValue.FindStringSubmatch(msg); m != nil {
		if f := fs.Lookup(m[1]); f != nil {
			if _, ok := f.Value.(interface{ Get() any }); ok {
				switch f.Value.(flag.Getter).Get().(type) {
				case time.Duration:
					msg += ": want a duration with its unit, such as 500ms, 30s or 2m"
				case int, int64, uint, uint64:
					msg += ": want a whole number"
				case float64:
					msg += ": want a number"
				}
			}
		}
	}
	if strings.HasPrefix(msg, "open ") { // the -config file cannot be read
		msg = "-config: " + msg
	}
	return msg
}

// badValue matches the flag package's error for a value its flag cannot parse.
var badValue = regexp.MustCompile(`^invalid value ".*" for flag -(\S+): parse error$`)

// undefinedFlag matches the flag package's error for an unknown flag.
var undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(\S+)$`)

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
	var names []string
	for name := range known {
		names = append(names, name)
	}
	sort.Strings(names) // a tie goes to the first name, the same on every run
	hint := ""
	if len(unknown) == 1 {
		hint = didYouMean(unknown[0], names)
	}
	return fmt.Errorf("%w: unknown environment variable %s%s: no flag of 'tether %s' has that name (see 'tether %s -h')",
		errUsage, strings.Join(unknown, ", "), hint, fs.Name(), fs.Name())
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
