package main

import "github.com/switchyard-io/switchyard/internal/demo"

func init() {
	commands["demo"] = command{demo.Summary, demo.Command}
}
