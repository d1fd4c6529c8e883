// Package modules starts the parts of a process in the order their
// dependencies ask for, runs their loops, and stops them in the reverse
// order: one place that knows the start and stop order of every role (as
// Tempo's modules.go and Prometheus' run.Group do). A process is the set of
// modules its targets need: a production role is one target, `dev` is all
// of them, over the same definitions.
package modules

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Module is one part of a process.
type Module struct {
	Name string
	// Deps are the modules started before this one (and stopped after it).
	Deps []string
	// Start builds the module; it returns once its dependents may use it.
	// It may wait (for a bucket, a store): ctx ends the wait.
	Start func(ctx context.Context) error
	// Run, when set, is the module's loop, run once every module has
	// started, until its context ends. Its end before the process is
	// stopped, with or without an error, stops the process.
	Run func(ctx context.Context) error
	// Stop, when set, releases what Start made, after Run has returned. It
	// is not called after a Start that failed (which releases what it made).
	Stop func() error
}

// Set is the modules a program knows, by name.
type Set struct {
	byName map[string]Module
	names  []string
	// Log, when set, says at debug level how long each module took to
	// start and to stop (a slow stop is found there).
	Log *slog.Logger
}

// Add registers m; a second module of the same name panics (a programming
// error).
func (s *Set) Add(m Module) {
	if s.byName == nil {
		s.byName = map[string]Module{}
	}
	if _, dup := s.byName[m.Name]; dup {
		panic("modules: " + m.Name + " added twice")
	}
	s.byName[m.Name] = m
	s.names = append(s.names, m.Name)
}

// Order is the start order of targets and their dependencies: each module
// after its dependencies, otherwise in the order the targets and deps name
// them.
func (s *Set) Order(targets ...string) ([]string, error) {
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string, path []string) error
	visit = func(name string, path []string) error {
		m, ok := s.byName[name]
		if !ok {
			if len(path) == 0 {
				return fmt.Errorf("modules: unknown module %q", name)
			}
			return fmt.Errorf("modules: %s depends on unknown module %q", path[len(path)-1], name)
		}
		switch state[name] {
		case 2:
			return nil
		case 1:
			return fmt.Errorf("modules: dependency cycle %v", append(path, name))
		}
		state[name] = 1
		for _, d := range m.Deps {
			if err := visit(d, append(slices.Clip(path), name)); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, name)
		return nil
	}
	for _, t := range targets {
		if err := visit(t, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// ErrStopped is what Run returns for a module loop that ended by itself
// without an error, which stops the process all the same.
var ErrStopped = errors.New("stopped")

// Run starts targets and their dependencies in order, runs their loops
// until ctx ends or one of them returns, then stops every started module
// in the reverse order: each module's loop is ended (its context
// cancelled) and waited for, then its Stop called. It returns the first
// error: of a start (unless ctx ended during it: the process was stopped
// while it waited), of a loop, or of a stop.
func (s *Set) Run(ctx context.Context, targets ...string) error {
	order, err := s.Order(targets...)
	if err != nil {
		return err
	}
	type running struct {
		m      Module
		cancel context.CancelFunc
		done   chan error
	}
	var started []*running
	var errs []error
	record := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	stopAll := func() {
		for i := len(started) - 1; i >= 0; i-- {
			r := started[i]
			at := time.Now()
			if r.done != nil {
				r.cancel()
				if err := <-r.done; err != nil && !errors.Is(err, context.Canceled) {
					record(fmt.Errorf("%s: %w", r.m.Name, err))
				}
			}
			if r.m.Stop != nil {
				if err := r.m.Stop(); err != nil {
					record(fmt.Errorf("stopping %s: %w", r.m.Name, err))
				}
			}
			if s.Log != nil {
				s.Log.Debug("module stopped", "module", r.m.Name, "took", time.Since(at))
			}
		}
	}
	for _, name := range order {
		m := s.byName[name]
		if m.Start != nil {
			at := time.Now()
			err := m.Start(ctx)
			if s.Log != nil {
				s.Log.Debug("module started", "module", name, "took", time.Since(at), "err", err)
			}
			if err != nil {
				// A failed start releases what it made itself: its
				// Stop is for a module that started. A start that the process's stop interrupted (a wait
				// ended) is no error of its own.
				if ctx.Err() == nil {
					record(fmt.Errorf("%s: %w", name, err))
				}
				stopAll()
				if len(errs) > 0 {
					return errs[0]
				}
				return nil
			}
		}
		started = append(started, &running{m: m})
	}
	var once sync.Once
	first := make(chan string, 1)
	for _, r := range started {
		if r.m.Run == nil {
			continue
		}
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r.cancel, r.done = cancel, make(chan error, 1)
		go func() {
			err := r.m.Run(rctx)
			if err == nil && rctx.Err() == nil {
				err = ErrStopped
			}
			r.done <- err
			once.Do(func() { first <- r.m.Name })
		}()
	}
	select {
	case <-ctx.Done():
	case name := <-first:
		// A loop ended by itself: its error leads (stopAll reads it).
		for i, r := range started {
			if r.m.Name == name {
				err := <-r.done
				if err != nil && !errors.Is(err, context.Canceled) {
					record(fmt.Errorf("%s: %w", name, err))
				}
				r.cancel()
				r.done = nil
				started[i] = r
			}
		}
	}
	stopAll()
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}
