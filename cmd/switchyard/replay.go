package main

import (
	"context"
	"io"
	"os"

	"github.com/switchyard-io/switchyard/internal/replay"
)

func init() {
	commands["replay"] = command{replay.Summary, func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return replay.Command(ctx, args, os.Stdin, stdout, stderr)
	}}
}
