package mockprovider

import (
	"context"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// addHeader sets a header on the SDK's request before it is signed.
func addHeader(name, value string) func(*middleware.Stack) error {
	return func(s *middleware.Stack) error {
		return s.Build.Add(middleware.BuildMiddlewareFunc("mockBehavior", func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
			if r, ok := in.Request.(*smithyhttp.Request); ok {
				r.Header.Set(name, value)
			}
			return next.HandleBuild(ctx, in)
		}), middleware.After)
	}
}
