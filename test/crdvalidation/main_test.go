// Package crdvalidation checks, against a real kube-apiserver, that the generated CRDs accept the
// samples, reject bad objects with messages that name the field, and serve the kubectl experience
// (short names, category, printer columns).
package crdvalidation

import (
	"testing"

	"github.com/switchyard-io/switchyard/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, "crdvalidation", &env) }
