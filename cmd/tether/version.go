package main

import (
	"flag"
	"fmt"
	"io"
	"runtime/debug"
)

// errNoCommand is returned by 'tether' without arguments: the usage is printed, exit status 2,
// no error line.
var errNoCommand = fmt.Errorf("%w: no command", errUsage)

// version prints 'tether version': the module version, the VCS revision (with "+dirty" for a
// modified work tree) and time, and the Go version, from the binary's build information.
// It takes no flags but -h, which prints its usage to stderr.
func version(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: tether version\n\nPrint the module version, the VCS revision and time recorded by 'go build'\n"+
			"(+dirty for a modified work tree) and the Go version. 'tether -version' is the same.\n")
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return fmt.Errorf("%w: version: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: version takes no arguments, got %q", errUsage, fs.Args())
	}
	fmt.Fprintln(stdout, versionLine())
	return nil
}

// versionLine is "tether <module version> (<revision>[+dirty], <time>) <go version>".
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "tether (no build information)"
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	rev := settings["vcs.revision"]
	if rev == "" {
		rev = "unknown revision"
	} else if settings["vcs.modified"] == "true" {
		rev += "+dirty"
	}
	if t := settings["vcs.time"]; t != "" {
		rev += ", " + t
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	return fmt.Sprintf("tether %s (%s) %s", v, rev, bi.GoVersion)
}
