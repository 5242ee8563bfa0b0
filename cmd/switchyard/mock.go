package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/switchyard-io/switchyard/internal/mockprovider"
)

func init() {
	commands["mock-provider"] = command{"run a mock OpenAI-compatible and Anthropic Messages provider that misbehaves on request (demo, tests)", runMock}
}

func runMock(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mock-provider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:9101", "address to serve on (loopback by default)")
	name := fs.String("name", "mock", "name shown in answers and the X-Mock-Name header")
	apiKey := fs.String("api-key", "", "require this key (Authorization: Bearer, api-key or x-api-key)")
	models := fs.String("models", "", "comma-separated models listed by GET /v1/models")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: switchyard mock-provider [flags]")
		fmt.Fprintln(stderr, "\nSteer it at run time: POST /_mock/behavior {\"model\":\"gpt-4o\",\"behavior\":{\"mode\":\"status\",\"status\":503}},")
		fmt.Fprintln(stderr, "GET /_mock/stats, POST /_mock/reset; or per request with the header X-Mock-Behavior: 503.")
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts := mockprovider.Options{Name: *name, APIKey: *apiKey}
	if *models != "" {
		opts.Models = strings.Split(*models, ",")
	}
	s := mockprovider.New(opts)
	defer s.Close()
	fmt.Fprintf(stderr, "mock provider %q listening on %s\n", *name, *listen)
	return mockprovider.ListenAndServe(ctx, *listen, s)
}
