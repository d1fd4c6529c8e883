package toolrunner_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/auditrail/auditrail/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testenv.LeakOptions()...) }
