// Package crdvalidation checks, against a real kube-apiserver, that the generated CRDs accept the
// samples, reject bad objects with messages that name the field, and serve the kubectl experience
// (short names, category, printer columns).
package crdvalidation

import (
	"fmt"
	"os"
	"testing"

	"github.com/switchyard-io/switchyard/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdvalidation:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "crdvalidation: stopping the control plane:", err)
	}
	os.Exit(code)
}
