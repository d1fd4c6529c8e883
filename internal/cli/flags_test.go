package cli

import (
	"os"
	"strings"
	"testing"
)

// The environment twins: a twin sets the flags the command line does not
// give; a flag given wins over its twin; onCommandLine tells the two
// apart, ignoreEnv takes back what twins set (not what the command line
// gave), and source names where a value came from.
func TestFlagsEnvironmentTwins(t *testing.T) {
	for _, tc := range []struct {
		name           string
		env            map[string]string
		args           []string
		ignore         []string
		wantA, wantB   string
		cmdlineA, envB bool   // onCommandLine("a"), after parsing: whether b came from the environment
		sourceA        string // source("a")
	}{
		{name: "defaults", wantA: "defA", wantB: "defB", sourceA: "--a"},
		{name: "twins", env: map[string]string{"AUDITRAIL_A": "envA", "AUDITRAIL_B": "envB"},
			wantA: "envA", wantB: "envB", envB: true, sourceA: "AUDITRAIL_A"},
		{name: "the command line wins over the twin", env: map[string]string{"AUDITRAIL_A": "envA"}, args: []string{"--a", "cliA"},
			wantA: "cliA", wantB: "defB", cmdlineA: true, sourceA: "--a"},
		{name: "ignoreEnv takes back a twin's value", env: map[string]string{"AUDITRAIL_A": "envA", "AUDITRAIL_B": "envB"}, ignore: []string{"b"},
			wantA: "envA", wantB: "defB", envB: true, sourceA: "AUDITRAIL_A"},
		{name: "ignoreEnv keeps the command line's value", env: map[string]string{"AUDITRAIL_B": "envB"}, args: []string{"--a", "cliA", "--b", "cliB"}, ignore: []string{"a", "b"},
			wantA: "cliA", wantB: "cliB", cmdlineA: true, sourceA: "--a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range []string{"AUDITRAIL_A", "AUDITRAIL_B"} {
				t.Setenv(name, "")
				os.Unsetenv(name) // restored by t.Setenv's cleanup
				if v, ok := tc.env[name]; ok {
					t.Setenv(name, v)
				}
			}
			fs := NewFlags("auditrail test")
			a := fs.String("a", "", "defA", "a")
			b := fs.String("b", "", "defB", "b")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			envB := fs.fromEnv["b"]
			fs.IgnoreEnv(tc.ignore...)
			if *a != tc.wantA || *b != tc.wantB {
				t.Errorf("a=%q b=%q, want %q %q", *a, *b, tc.wantA, tc.wantB)
			}
			if got := fs.OnCommandLine("a"); got != tc.cmdlineA {
				t.Errorf("onCommandLine(a) = %v", got)
			}
			if envB != tc.envB {
				t.Errorf("b from the environment: %v", envB)
			}
			if got := fs.Source("a"); got != tc.sourceA {
				t.Errorf("source(a) = %q, want %q", got, tc.sourceA)
			}
		})
	}
}

// A repeatable flag: each use adds a value; its twin (values separated by
// white space) applies only when the command line gives none.
func TestFlagsStrings(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  string
		args []string
		want []string
	}{
		{name: "none"},
		{name: "repeated", args: []string{"--w", "x,1", "--w", "y,2"}, want: []string{"x,1", "y,2"}},
		{name: "twin", env: "x,1  y,2\n", want: []string{"x,1", "y,2"}},
		{name: "the command line wins", env: "x,1", args: []string{"--w", "z,3"}, want: []string{"z,3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AUDITRAIL_W", "")
			os.Unsetenv("AUDITRAIL_W")
			if tc.env != "" {
				t.Setenv("AUDITRAIL_W", tc.env)
			}
			fs := NewFlags("auditrail test")
			w := fs.Strings("w", "", "a witness")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if strings.Join(*w, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("values %q, want %q", *w, tc.want)
			}
		})
	}
	fs := NewFlags("auditrail test")
	fs.Strings("w", "", "a witness")
	if err := fs.Parse([]string{"--w", " "}); err == nil {
		t.Fatal("an empty value was taken")
	}
}
