// Package cli is what the command-line programs share: flag sets whose
// flags have AUDITRAIL_… environment twins, usage errors (exit status 2).
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"
)

// UsageError is a mistake in the command line (exit status 2).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usage marks err as a mistake in the command line.
func Usage(err error) error { return UsageError{Err: err} }

// UsageErrorf is a UsageError with a formatted message.
func UsageErrorf(format string, args ...any) error {
	return UsageError{Err: fmt.Errorf(format, args...)}
}

// Flags is a FlagSet whose flags have AUDITRAIL_… environment twins.
//
// An environment value is applied after parsing, to the flags not given on
// the command line; it never becomes a flag's default, so usage text never
// shows it, and an error about it names the variable, never the value (it
// may be a key or a DSN with a password). A flag given on the command line
// wins over its own twin, and a command whose flags exclude each other lets
// the command line's choice win over the twins of the others (IgnoreEnv).
type Flags struct {
	*flag.FlagSet
	envs []envTwin
	// cmdline and fromEnv are the flags given on the command line and those
	// set from their environment twins (filled by applyEnv).
	cmdline, fromEnv map[string]bool
	lists            []listFlag
}

// listFlag is a repeatable flag, whose twin replaces its values.
type listFlag struct {
	name string
	vals *[]string
}

// envTwin is the environment variable of a flag and what it must parse as.
type envTwin struct{ flag, env, want string }

// NewFlags is the flag set of command (e.g. "auditrail dev").
func NewFlags(command string) *Flags {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	f := &Flags{FlagSet: fs}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s [flags]\n\nflags (each has the AUDITRAIL_… environment twin shown):\n", command)
		fs.PrintDefaults()
	}
	return f
}

func envName(flagName string) string {
	return "AUDITRAIL_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// twin records the environment twin of flag name (envOverride, or
// AUDITRAIL_<NAME>) and returns the usage text naming it.
func (f *Flags) twin(name, envOverride, want, usage string) string {
	env := envName(name)
	if envOverride != "" {
		env = envOverride
	}
	f.envs = append(f.envs, envTwin{flag: name, env: env, want: want})
	return usage + " (env " + env + ")"
}

// String defines a string flag; env overrides the AUDITRAIL_<NAME> twin.
func (f *Flags) String(name, env, def, usage string) *string {
	return f.FlagSet.String(name, def, f.twin(name, env, "a string", usage))
}

func (f *Flags) Int(name, env string, def int, usage string) *int {
	return f.FlagSet.Int(name, def, f.twin(name, env, "an integer", usage))
}

func (f *Flags) Int64(name, env string, def int64, usage string) *int64 {
	return f.FlagSet.Int64(name, def, f.twin(name, env, "an integer", usage))
}

func (f *Flags) Float(name, env string, def float64, usage string) *float64 {
	return f.FlagSet.Float64(name, def, f.twin(name, env, "a number", usage))
}

func (f *Flags) Duration(name, env string, def time.Duration, usage string) *time.Duration {
	return f.FlagSet.Duration(name, def, f.twin(name, env, "a duration", usage))
}

func (f *Flags) Bool(name, env string, def bool, usage string) *bool {
	return f.FlagSet.Bool(name, def, f.twin(name, env, "a boolean", usage))
}

// stringList is a repeatable flag: each use adds a value; its environment
// twin holds the values separated by white space.
type stringList struct {
	vals    *[]string
	fromEnv bool
}

func (l stringList) String() string {
	if l.vals == nil {
		return ""
	}
	return strings.Join(*l.vals, " ")
}

func (l stringList) Set(v string) error {
	if l.fromEnv {
		*l.vals = append((*l.vals)[:0], strings.Fields(v)...)
		return nil
	}
	v = strings.TrimSpace(v)
	if v == "" {
		return errors.New("empty value")
	}
	*l.vals = append(*l.vals, v)
	return nil
}

// Strings defines a repeatable string flag (each use adds a value); its
// environment twin holds the values separated by white space.
func (f *Flags) Strings(name, env, usage string) *[]string {
	vals := new([]string)
	f.FlagSet.Var(stringList{vals: vals}, name, f.twin(name, env, "values separated by spaces", usage+" (repeatable)"))
	f.lists = append(f.lists, listFlag{name: name, vals: vals})
	return vals
}

// IntVar defines an int flag stored in p, whose value is its default.
func (f *Flags) IntVar(p *int, name, env, usage string) {
	f.FlagSet.IntVar(p, name, *p, f.twin(name, env, "an integer", usage))
}

// DurationVar defines a duration flag stored in p, whose value is its
// default.
func (f *Flags) DurationVar(p *time.Duration, name, env, usage string) {
	f.FlagSet.DurationVar(p, name, *p, f.twin(name, env, "a duration", usage))
}

// applyEnv sets the flags not given on the command line from their
// environment twins. Errors name the variable only.
func (f *Flags) applyEnv() error {
	f.cmdline, f.fromEnv = map[string]bool{}, map[string]bool{}
	f.Visit(func(fl *flag.Flag) { f.cmdline[fl.Name] = true })
	var errs error
	for _, e := range f.envs {
		v, ok := os.LookupEnv(e.env)
		if !ok || f.cmdline[e.flag] {
			continue
		}
		if l := f.list(e.flag); l != nil {
			_ = (stringList{vals: l, fromEnv: true}).Set(v)
			f.fromEnv[e.flag] = true
			continue
		}
		if err := f.FlagSet.Set(e.flag, v); err != nil {
			errs = errors.Join(errs, fmt.Errorf("%s: not %s", e.env, e.want))
			continue
		}
		f.fromEnv[e.flag] = true
	}
	return errs
}

func (f *Flags) list(name string) *[]string {
	for _, l := range f.lists {
		if l.name == name {
			return l.vals
		}
	}
	return nil
}

// OnCommandLine reports whether flag name was given on the command line
// (not by its environment twin, not left at its default).
func (f *Flags) OnCommandLine(name string) bool { return f.cmdline[name] }

// IgnoreEnv sets back to their defaults those of the flags named that
// their environment twins set: for a command whose command line chose a
// mode those variables belong to the other side of (the command line wins
// over the environment, also over the twins of the flags it excludes).
func (f *Flags) IgnoreEnv(names ...string) {
	for _, name := range names {
		if !f.fromEnv[name] {
			continue
		}
		if l := f.list(name); l != nil {
			*l = nil
			delete(f.fromEnv, name)
			continue
		}
		fl := f.Lookup(name)
		_ = fl.Value.Set(fl.DefValue) // the default of the flag parses as itself
		delete(f.fromEnv, name)
	}
}

// Source names where flag name's value came from, for an error: the flag,
// or its environment twin.
func (f *Flags) Source(name string) string {
	if f.fromEnv[name] {
		for _, e := range f.envs {
			if e.flag == name {
				return e.env
			}
		}
	}
	return "--" + name
}

// ParseKeepArgs parses args, prints the usage on stdout for -h/--help (and
// returns flag.ErrHelp) or on stderr for a mistake (a usage error), then
// applies the environment.
func (f *Flags) ParseKeepArgs(args []string) error {
	err := f.FlagSet.Parse(args)
	if err != nil {
		out := io.Writer(os.Stderr)
		if errors.Is(err, flag.ErrHelp) {
			out = os.Stdout
		}
		f.SetOutput(out)
		f.Usage()
		f.SetOutput(io.Discard)
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return Usage(err)
	}
	if err := f.applyEnv(); err != nil {
		return Usage(err)
	}
	return nil
}

// Parse is ParseKeepArgs refusing positional arguments.
func (f *Flags) Parse(args []string) error {
	if err := f.ParseKeepArgs(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return UsageErrorf("unexpected arguments: %v", f.Args())
	}
	return nil
}

// LogFlags adds --log-level and --log-format and returns a constructor.
func (f *Flags) LogFlags(defFormat string) func(w io.Writer) (*slog.Logger, error) {
	level := f.String("log-level", "", "info", "log level: debug, info, warn, error")
	format := f.String("log-format", "", defFormat, "log format: text or json")
	return func(w io.Writer) (*slog.Logger, error) {
		var lv slog.Level
		if err := lv.UnmarshalText([]byte(*level)); err != nil {
			return nil, UsageErrorf("--log-level: want debug, info, warn or error")
		}
		opts := &slog.HandlerOptions{Level: lv}
		switch *format {
		case "text":
			return slog.New(slog.NewTextHandler(w, opts)), nil
		case "json":
			return slog.New(slog.NewJSONHandler(w, opts)), nil
		}
		return nil, UsageErrorf("--log-format: want text or json")
	}
}
