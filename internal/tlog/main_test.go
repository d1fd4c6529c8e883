package tlog_test

import (
	"testing"

	"github.com/auditrail/auditrail/internal/testenv"
)

// ParallelRootOf starts goroutines: none may outlive it.
func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }
