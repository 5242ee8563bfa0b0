//go:build !linux

package demo

import "io"

// termSize is unknown here: the live view is not cut to the terminal.
func termSize(io.Writer) (cols, rows int) { return 0, 0 }
