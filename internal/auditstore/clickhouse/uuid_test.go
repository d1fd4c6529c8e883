package clickhouse

import (
	"testing"

	"github.com/google/uuid"
)

func TestAppendUUIDIsCanonical(t *testing.T) {
	for i := 0; i < 1000; i++ {
		u := uuid.New()
		if got := string(appendUUID(nil, u)); got != u.String() {
			t.Fatalf("%s != %s", got, u)
		}
	}
}
