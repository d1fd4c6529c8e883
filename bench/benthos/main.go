// Command benthos is Benthos v4.27 with the components the ingest
// benchmark's generic pipeline uses (NATS JetStream in, MessagePack to
// JSON, a Bloblang mapping, batches POSTed to ClickHouse's HTTP
// interface), built from its public packages as Benthos documents for
// custom builds. It is a module apart, so that the product's go.mod does
// not carry Benthos' dependencies: `make bin/benthos` builds it.
package main

import (
	"context"

	"github.com/benthosdev/benthos/v4/public/service"

	_ "github.com/benthosdev/benthos/v4/public/components/io"
	_ "github.com/benthosdev/benthos/v4/public/components/msgpack"
	_ "github.com/benthosdev/benthos/v4/public/components/nats"
	_ "github.com/benthosdev/benthos/v4/public/components/pure"
)

func main() { service.RunCLI(context.Background()) }
