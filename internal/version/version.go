// Package version is the release of this source: the newest version of
// CHANGELOG.md (a test keeps them equal), marked as a release only in the
// binaries `make release` builds.
package version

import (
	"fmt"
	"runtime/debug"
)

// Release is the semantic version this source is, or is being prepared
// as: the first version heading of CHANGELOG.md.
const Release = "0.12.4"

// tagged is "true" in the binaries make release builds (-ldflags -X);
// any other build is a development build of Release.
var tagged string

// String is the version a binary reports: Release for a release build,
// Release-dev otherwise (a pre-release of it in semantic versioning).
func String() string {
	if tagged == "true" {
		return Release
	}
	return Release + "-dev"
}

// Line is what `auditrail version` prints: the version, the commit the
// binary was built from (and whether its work tree was modified), and the
// Go version.
func Line() string {
	commit, modified, goVersion := "unknown", "", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
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
	}
	return fmt.Sprintf("auditrail %s commit %s%s %s", String(), commit, modified, goVersion)
}
