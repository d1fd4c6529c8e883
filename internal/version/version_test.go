package version

import (
	"os"
	"regexp"
	"testing"
	"time"

	"golang.org/x/mod/semver"
)

// headingRe is a version heading of CHANGELOG.md: "## [1.2.3] - 2026-11-28"
// or "## [1.2.3] - unreleased".
var headingRe = regexp.MustCompile(`(?m)^## \[([^\]]+)\] - (\S+)$`)

// Release is a semantic version and the newest heading of CHANGELOG.md;
// the versions below it are older, and each released one has a date.
func TestReleaseIsTheChangelogsNewest(t *testing.T) {
	if !semver.IsValid("v"+Release) || semver.Prerelease("v"+Release) != "" {
		t.Fatalf("Release %q is not a semantic version of a release", Release)
	}
	raw, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	hs := headingRe.FindAllStringSubmatch(string(raw), -1)
	if len(hs) == 0 {
		t.Fatal("CHANGELOG.md has no version heading (## [x.y.z] - YYYY-MM-DD)")
	}
	if hs[0][1] != Release {
		t.Errorf("CHANGELOG.md's newest version is %s, internal/version.Release %s: keep them equal", hs[0][1], Release)
	}
	for i, h := range hs {
		if !semver.IsValid("v" + h[1]) {
			t.Errorf("CHANGELOG.md: %q is not a semantic version", h[1])
		}
		if i > 0 && semver.Compare("v"+h[1], "v"+hs[i-1][1]) >= 0 {
			t.Errorf("CHANGELOG.md: %s is listed below %s but is not older", h[1], hs[i-1][1])
		}
		if h[2] == "unreleased" && i == 0 {
			continue
		}
		if _, err := time.Parse(time.DateOnly, h[2]); err != nil {
			t.Errorf("CHANGELOG.md: %s is dated %q: a date (YYYY-MM-DD), or unreleased for the newest", h[1], h[2])
		}
	}
}

func TestString(t *testing.T) {
	defer func(old string) { tagged = old }(tagged)
	tagged = ""
	if String() != Release+"-dev" || !semver.IsValid("v"+String()) {
		t.Errorf("a development build reports %q", String())
	}
	tagged = "true"
	if String() != Release {
		t.Errorf("a release build reports %q", String())
	}
}
