package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// errNoCommand is returned by 'tether' without arguments: the usage is printed, exit status 2,
// no error line.
var errNoCommand = fmt.Errorf("%w: no command", errUsage)

// version prints 'tether version': the module version, the VCS revision (with "+dirty" for a
// modified work tree) and time, and the Go version, from the binary's build information.
func version(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: version takes no arguments, got %q", errUsage, args)
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
