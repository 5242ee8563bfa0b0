package main

import "github.com/switchyard-io/switchyard/internal/simulate"

func init() {
	commands["simulate"] = command{simulate.Summary, simulate.Command}
}
