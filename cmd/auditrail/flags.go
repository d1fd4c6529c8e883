package main

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

// usageError is a mistake in the command line (exit status 2).
type usageError struct{ error }

func usageErrorf(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// flags is a FlagSet whose flags have AUDITRAIL_… environment twins.
//
// An environment value is applied after parsing, to the flags not given on
// the command line; it never becomes a flag's default, so usage text never
// shows it, and an error about it names the variable, never the value (it
// may be a key or a DSN with a password). A flag given on the command line
// wins over its own twin, and a command whose flags exclude each other lets
// the command line's choice win over the twins of the others (ignoreEnv).
type flags struct {
	*flag.FlagSet
	envs []envTwin
	// cmdline and fromEnv are the flags given on the command line and those
	// set from their environment twins (filled by applyEnv).
	cmdline, fromEnv map[string]bool
}

// envTwin is the environment variable of a flag and what it must parse as.
type envTwin struct{ flag, env, want string }

func newFlags(name string) *flags {
	fs := flag.NewFlagSet("auditrail "+name, flag.ContinueOnError)
	f := &flags{FlagSet: fs}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: auditrail %s [flags]\n\nflags (each has the AUDITRAIL_… environment twin shown):\n", name)
		fs.PrintDefaults()
	}
	return f
}

func envName(flagName string) string {
	return "AUDITRAIL_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// twin records the environment twin of flag name (envOverride, or
// AUDITRAIL_<NAME>) and returns the usage text naming it.
func (f *flags) twin(name, envOverride, want, usage string) string {
	env := envName(name)
	if envOverride != "" {
		env = envOverride
	}
	f.envs = append(f.envs, envTwin{flag: name, env: env, want: want})
	return usage + " (env " + env + ")"
}

// String defines a string flag; env overrides the AUDITRAIL_<NAME> twin.
func (f *flags) String(name, env, def, usage string) *string {
	return f.FlagSet.String(name, def, f.twin(name, env, "a string", usage))
}

func (f *flags) Int(name, env string, def int, usage string) *int {
	return f.FlagSet.Int(name, def, f.twin(name, env, "an integer", usage))
}

func (f *flags) Int64(name, env string, def int64, usage string) *int64 {
	return f.FlagSet.Int64(name, def, f.twin(name, env, "an integer", usage))
}

func (f *flags) Float(name, env string, def float64, usage string) *float64 {
	return f.FlagSet.Float64(name, def, f.twin(name, env, "a number", usage))
}

func (f *flags) Duration(name, env string, def time.Duration, usage string) *time.Duration {
	return f.FlagSet.Duration(name, def, f.twin(name, env, "a duration", usage))
}

func (f *flags) Bool(name, env string, def bool, usage string) *bool {
	return f.FlagSet.Bool(name, def, f.twin(name, env, "a boolean", usage))
}

// applyEnv sets the flags not given on the command line from their
// environment twins. Errors name the variable only.
func (f *flags) applyEnv() error {
	f.cmdline, f.fromEnv = map[string]bool{}, map[string]bool{}
	f.Visit(func(fl *flag.Flag) { f.cmdline[fl.Name] = true })
	var errs error
	for _, e := range f.envs {
		v, ok := os.LookupEnv(e.env)
		if !ok || f.cmdline[e.flag] {
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

// onCommandLine reports whether flag name was given on the command line
// (not by its environment twin, not left at its default).
func (f *flags) onCommandLine(name string) bool { return f.cmdline[name] }

// ignoreEnv sets back to their defaults those of the flags named that
// their environment twins set: for a command whose command line chose a
// mode those variables belong to the other side of (the command line wins
// over the environment, also over the twins of the flags it excludes).
func (f *flags) ignoreEnv(names ...string) {
	for _, name := range names {
		if !f.fromEnv[name] {
			continue
		}
		fl := f.Lookup(name)
		_ = fl.Value.Set(fl.DefValue) // the default of the flag parses as itself
		delete(f.fromEnv, name)
	}
}

// source names where flag name's value came from, for an error: the flag,
// or its environment twin.
func (f *flags) source(name string) string {
	if f.fromEnv[name] {
		for _, e := range f.envs {
			if e.flag == name {
				return e.env
			}
		}
	}
	return "--" + name
}

// parseKeepArgs parses args, prints the usage on stdout for -h/--help (and
// returns flag.ErrHelp) or on stderr for a mistake (a usage error), then
// applies the environment.
func (f *flags) parseKeepArgs(args []string) error {
	err := f.Parse(args)
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
		return usageError{err}
	}
	if err := f.applyEnv(); err != nil {
		return usageError{err}
	}
	return nil
}

// parse is parseKeepArgs refusing positional arguments.
func (f *flags) parse(args []string) error {
	if err := f.parseKeepArgs(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return usageErrorf("unexpected arguments: %v", f.Args())
	}
	return nil
}

// logFlags adds --log-level and --log-format and returns a constructor.
func (f *flags) logFlags(defFormat string) func(w io.Writer) (*slog.Logger, error) {
	level := f.String("log-level", "", "info", "log level: debug, info, warn, error")
	format := f.String("log-format", "", defFormat, "log format: text or json")
	return func(w io.Writer) (*slog.Logger, error) {
		var lv slog.Level
		if err := lv.UnmarshalText([]byte(*level)); err != nil {
			return nil, usageErrorf("--log-level: want debug, info, warn or error")
		}
		opts := &slog.HandlerOptions{Level: lv}
		switch *format {
		case "text":
			return slog.New(slog.NewTextHandler(w, opts)), nil
		case "json":
			return slog.New(slog.NewJSONHandler(w, opts)), nil
		}
		return nil, usageErrorf("--log-format: want text or json")
	}
}
