package bench

import (
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func tempDir() (string, error) { return os.MkdirTemp("", "auditrail-bench-") }
func removeAll(dir string)     { _ = os.RemoveAll(dir) }

func jetstreamNew(nc *nats.Conn) (jetstream.JetStream, error) { return jetstream.New(nc) }
