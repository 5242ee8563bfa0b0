package main

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/switchyard-io/switchyard/internal/report"
)

func init() {
	commands["report"] = command{report.Summary, func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return report.Command(ctx, args, time.Now(), os.Stdin, stdout, stderr)
	}}
}
