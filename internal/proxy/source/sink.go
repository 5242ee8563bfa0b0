// Package source feeds the proxy its routing table: FileSource from manifest files (standalone
// mode), ConfigMapSource from the controller's ConfigMap and credentials Secret, watched through
// the Kubernetes API. A source only hands tables and rejections to a Sink; it never serves a
// request, and package proxy does not import it, so the data plane does not depend on client-go.
package source

import (
	"log/slog"

	"github.com/switchyard-io/switchyard/internal/routing"
)

// Sink is what a config source needs of the proxy (*proxy.Server is one).
type Sink interface {
	// Apply serves t, loaded from source.
	Apply(t *routing.Table, source string)
	// ApplyRejected serves t together with err, the rejection of (part of) the config it came
	// from: the objects held back, or the on-call overrides of a config refused whole.
	ApplyRejected(t *routing.Table, source string, err error, problems []routing.Problem)
	// RejectConfig records a config that did not load; the table serving now keeps serving.
	RejectConfig(source string, err error, problems []routing.Problem)
	// Serving is the table served now, nil before the first load: an object with a problem
	// keeps the form it has there.
	Serving() *routing.Table
	// Logger is where the source reports what the sink does not (a hung read, no file events).
	Logger() *slog.Logger
}
