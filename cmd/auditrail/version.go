package main

import (
	"context"
	"fmt"
	"os"

	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/version"
)

// runVersion prints the release (version.String), the commit it was built
// from and the Go version.
func runVersion(_ context.Context, args []string) error {
	fs := cli.NewFlags("auditrail version")
	if err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Fprintln(os.Stdout, version.Line())
	return nil
}
