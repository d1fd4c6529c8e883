package cpstate

import (
	"testing"

	"github.com/auditrail/auditrail/internal/testenv"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }
