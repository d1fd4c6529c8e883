package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
)

// usageError is a mistake in the command line (exit status 2).
type usageError struct{ error }

func usageErrorf(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// flags is a FlagSet whose flags take their defaults from AUDITRAIL_… variables.
type flags struct {
	*flag.FlagSet
	envErr error
}

func newFlags(name string) *flags {
	fs := flag.NewFlagSet("auditrail "+name, flag.ContinueOnError)
	return &flags{FlagSet: fs}
}

func envName(flagName string) string {
	return "AUDITRAIL_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (f *flags) env(name, envOverride string) (string, string, bool) {
	env := envName(name)
	if envOverride != "" {
		env = envOverride
	}
	v, ok := os.LookupEnv(env)
	return env, v, ok
}

// String defines a string flag; env overrides the AUDITRAIL_<NAME> twin.
func (f *flags) String(name, env, def, usage string) *string {
	envVar, v, ok := f.env(name, env)
	if ok {
		def = v
	}
	return f.FlagSet.String(name, def, usage+" (env "+envVar+")")
}

func (f *flags) Int(name, env string, def int, usage string) *int {
	envVar, v, ok := f.env(name, env)
	if ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			f.envErr = errors.Join(f.envErr, fmt.Errorf("%s=%q: not an integer", envVar, v))
		} else {
			def = n
		}
	}
	return f.FlagSet.Int(name, def, usage+" (env "+envVar+")")
}

func (f *flags) Float(name, env string, def float64, usage string) *float64 {
	envVar, v, ok := f.env(name, env)
	if ok {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			f.envErr = errors.Join(f.envErr, fmt.Errorf("%s=%q: not a number", envVar, v))
		} else {
			def = n
		}
	}
	return f.FlagSet.Float64(name, def, usage+" (env "+envVar+")")
}

func (f *flags) Duration(name, env string, def time.Duration, usage string) *time.Duration {
	envVar, v, ok := f.env(name, env)
	if ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			f.envErr = errors.Join(f.envErr, fmt.Errorf("%s=%q: not a duration", envVar, v))
		} else {
			def = d
		}
	}
	return f.FlagSet.Duration(name, def, usage+" (env "+envVar+")")
}

func (f *flags) Bool(name, env string, def bool, usage string) *bool {
	envVar, v, ok := f.env(name, env)
	if ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			f.envErr = errors.Join(f.envErr, fmt.Errorf("%s=%q: not a boolean", envVar, v))
		} else {
			def = b
		}
	}
	return f.FlagSet.Bool(name, def, usage+" (env "+envVar+")")
}

// parse parses args; errors are usage errors.
func (f *flags) parse(args []string) error {
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if f.envErr != nil {
		return usageError{f.envErr}
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
			return nil, usageErrorf("--log-level %q: %v", *level, err)
		}
		opts := &slog.HandlerOptions{Level: lv}
		switch *format {
		case "text":
			return slog.New(slog.NewTextHandler(w, opts)), nil
		case "json":
			return slog.New(slog.NewJSONHandler(w, opts)), nil
		}
		return nil, usageErrorf("--log-format %q: want text or json", *format)
	}
}
