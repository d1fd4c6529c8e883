package main

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/auditrail/auditrail/internal/cli"
)

// runVersion prints the module version, the commit it was built from and
// the Go version.
func runVersion(_ context.Context, args []string) error {
	fs := cli.NewFlags("auditrail version")
	if err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Fprintln(os.Stdout, versionLine())
	return nil
}

func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "auditrail (no build information)"
	}
	version, commit, modified := bi.Main.Version, "unknown", ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = " (modified)"
			}
		}
	}
	if version == "" {
		version = "(devel)"
	}
	return fmt.Sprintf("auditrail %s commit %s%s %s", version, commit, modified, bi.GoVersion)
}
