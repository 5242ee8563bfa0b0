package main

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/switchyard-io/switchyard/internal/mockprovider"
)

func init() {
	commands["mock-provider"] = command{"run a mock provider (OpenAI-compatible and Anthropic Messages, or Claude on Bedrock or Vertex) that misbehaves on request (demo, tests)", runMock}
}

func runMock(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mock-provider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:9101", "address to serve on (loopback by default)")
	name := fs.String("name", "mock", "name shown in answers and the X-Mock-Name header")
	wire := fs.String("wire", "openai", "wire format: openai (the OpenAI API and the Anthropic Messages API), bedrock (Bedrock Runtime InvokeModel, SigV4-verified) or vertex (Vertex AI rawPredict, with its own OAuth token endpoint)")
	apiKey := fs.String("api-key", "", "openai: require this key (Authorization: Bearer, api-key or x-api-key)")
	models := fs.String("models", "", "openai: comma-separated models listed by GET /v1/models")
	region := fs.String("region", "us-east-1", "bedrock: the SigV4 region requests must be signed for")
	accessKey := fs.String("access-key-id", "", "bedrock: the access key id it accepts (its secret from $MOCK_AWS_SECRET_ACCESS_KEY)")
	project := fs.String("project", "", "vertex: the only project served (default: any)")
	location := fs.String("location", "", "vertex: the only location served (default: any)")
	serviceAccount := fs.String("service-account", "", "vertex: a service-account key file (JSON) whose signed assertions the token endpoint (/token) accepts")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: switchyard mock-provider [flags]")
		fmt.Fprintln(stderr, "\nSteer it at run time: POST /_mock/behavior {\"model\":\"gpt-4o\",\"behavior\":{\"mode\":\"status\",\"status\":503}},")
		fmt.Fprintln(stderr, "GET /_mock/stats, POST /_mock/reset (openai); or per request with the header X-Mock-Behavior: 503.")
		fmt.Fprintln(stderr, "Bedrock and Vertex take {\"stream_error\":\"modelStreamErrorException\"} beside behavior too.")
		fmt.Fprint(stderr, "\n"+mockprovider.BehaviorHelp())
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	var m mockprovider.Mock
	switch *wire {
	case "openai":
		opts := mockprovider.Options{Name: *name, APIKey: *apiKey}
		if *models != "" {
			opts.Models = strings.Split(*models, ",")
		}
		m = mockprovider.New(opts)
	case "bedrock":
		secret := os.Getenv("MOCK_AWS_SECRET_ACCESS_KEY")
		if *accessKey == "" || secret == "" {
			return errors.New("mock-provider --wire bedrock: --access-key-id and $MOCK_AWS_SECRET_ACCESS_KEY are required")
		}
		m = mockprovider.CloudControl{CloudMock: mockprovider.NewBedrock(mockprovider.BedrockOptions{Name: *name, Region: *region,
			Credentials: []aws.Credentials{{AccessKeyID: *accessKey, SecretAccessKey: secret}}})}
	case "vertex":
		if *serviceAccount == "" {
			return errors.New("mock-provider --wire vertex: --service-account is required")
		}
		email, pub, err := readServiceAccount(*serviceAccount)
		if err != nil {
			return err
		}
		m = mockprovider.CloudControl{CloudMock: mockprovider.NewVertex(mockprovider.VertexOptions{Name: *name, Project: *project, Location: *location,
			ServiceAccounts: map[string]*rsa.PublicKey{email: pub}})}
	default:
		return fmt.Errorf("mock-provider: --wire %q: want openai, bedrock or vertex", *wire)
	}
	defer m.Close()
	fmt.Fprintf(stderr, "mock provider %q (%s) listening on %s\n", *name, *wire, *listen)
	return mockprovider.ListenAndServe(ctx, *listen, m)
}

// readServiceAccount reads a service-account key file's client_email and public key. Errors
// never quote the file's content.
func readServiceAccount(path string) (string, *rsa.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	var sa struct {
		ClientEmail string `json:"client_email"`
		PrivateKey  string `json:"private_key"`
	}
	if json.Unmarshal(b, &sa) != nil || sa.ClientEmail == "" {
		return "", nil, fmt.Errorf("%s: not a service-account key file (JSON with client_email and private_key)", path)
	}
	block, _ := pem.Decode([]byte(sa.PrivateKey))
	if block == nil {
		return "", nil, fmt.Errorf("%s: private_key is not PEM", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		if k, err = x509.ParsePKCS1PrivateKey(block.Bytes); err != nil {
			return "", nil, fmt.Errorf("%s: private_key is not an RSA key", path)
		}
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return "", nil, fmt.Errorf("%s: private_key is not an RSA key", path)
	}
	return sa.ClientEmail, &rk.PublicKey, nil
}
