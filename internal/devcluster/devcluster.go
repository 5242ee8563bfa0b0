// Package devcluster runs Switchyard the way a cluster would, on one machine without pods: a real
// kube-apiserver and etcd (the envtest binaries), `switchyard controller` and one or more
// `switchyard proxy --configmap …` as local processes, two mock providers (OpenAI and Anthropic
// wire formats) and a mock Bedrock and a mock Vertex AI. `make dev-cluster`
// and the end-to-end suite both use it. Everything listens on loopback only.
package devcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	_ "embed"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-io/switchyard/internal/procs"
	"github.com/switchyard-io/switchyard/internal/testenv"
)

// ProxyNamespace holds the routing ConfigMap; Namespace holds the channels and policies.
const (
	ProxyNamespace = "switchyard-system"
	Namespace      = "llm"
	ConfigMapName  = "switchyard-routing"
	// ClientKey is the key of the sample GatewayClient "dev" (gateway.yaml.tmpl): the proxies run
	// with --require-client-key, as installed in a cluster, so every request carries it.
	ClientKey = "sk-sy-dev-local-client-5f0b8e2d7a3c9164"
)

// The mock clouds' settings; the credentials are the mocks' own, made up for the dev cluster.
const (
	BedrockRegion      = "us-east-1"
	VertexProject      = "dev-project"
	VertexLocation     = "us-east5"
	bedrockAccessKeyID = "AKIDDEVCLUSTER"
	bedrockSecretKey   = "dev-cluster-bedrock-secret"
	vertexEmail        = "switchyard@dev-project.iam.gserviceaccount.com"
)

//go:embed gateway.yaml.tmpl
var gatewayTemplate string

// Options configure a Cluster.
type Options struct {
	// Proxies is the number of proxy replicas (default 1).
	Proxies int
	// PollInterval of the controller (default 1s).
	PollInterval time.Duration
	// Dir keeps the binary, logs and manifests (default: a new temp dir, removed by Stop).
	Dir string
}

// Cluster is a running local control plane with Switchyard on it.
type Cluster struct {
	Env   *testenv.Env
	Dir   string
	Bin   string
	MockA *Proc
	MockB *Proc
	// MockBedrock and MockVertex serve Claude in Bedrock's and Vertex AI's wire formats, checking
	// each request's SigV4 signature and bearer token.
	MockBedrock *Proc
	MockVertex  *Proc
	Proxies     []*Proc
	Controller  *Proc
	// Manifests is the rendered sample file (channels point at the mocks).
	Manifests string
	ownDir    bool
}

// Proc is one local process with its log file.
type Proc struct {
	Name    string
	Args    []string
	Env     []string
	LogPath string
	// Addr is the main listen address; Admin the admin one (proxies).
	Addr, Admin string
	c           *procs.Child
}

// Start builds the binary, starts the control plane and every process, and waits until they answer.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Proxies <= 0 {
		opts.Proxies = 1
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	c := &Cluster{Dir: opts.Dir}
	if c.Dir == "" {
		d, err := os.MkdirTemp("", "switchyard-dev-")
		if err != nil {
			return nil, err
		}
		c.Dir, c.ownDir = d, true
	}
	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()
	env, err := testenv.Start()
	if err != nil {
		return nil, err
	}
	c.Env = env
	c.Bin = filepath.Join(c.Dir, "switchyard")
	build := exec.CommandContext(ctx, "go", "build", "-o", c.Bin, "./cmd/switchyard")
	build.Dir = env.Root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %v\n%s", err, out)
	}
	for _, ns := range []string{ProxyNamespace, Namespace} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, err
		}
	}

	// Every port at once, each held until all are chosen: a port closed as soon as it was
	// picked can be handed out again by the next pick, and two processes would share it (a
	// proxy's admin port answering 404 as another proxy's API port).
	addrs, err := procs.FreeAddrs(4 + 2*opts.Proxies)
	if err != nil {
		return nil, err
	}
	next := func() string { a := addrs[0]; addrs = addrs[1:]; return a }
	c.MockA = c.proc("mock-a", "mock-provider", "--name", "provider-a", "--api-key", "sk-dev-provider-a")
	c.MockB = c.proc("mock-b", "mock-provider", "--name", "provider-b", "--api-key", "dev-provider-b-key")
	c.MockBedrock = c.proc("mock-bedrock", "mock-provider", "--wire", "bedrock", "--name", "bedrock", "--region", BedrockRegion,
		"--access-key-id", bedrockAccessKeyID)
	c.MockBedrock.Env = append(c.MockBedrock.Env, "MOCK_AWS_SECRET_ACCESS_KEY="+bedrockSecretKey)
	c.MockVertex = c.proc("mock-vertex", "mock-provider", "--wire", "vertex", "--name", "vertex", "--project", VertexProject,
		"--location", VertexLocation, "--service-account", filepath.Join(c.Dir, "vertex-service-account.json"))
	for _, m := range c.mocks() {
		m.Addr = next()
		m.Args = append(m.Args, "--listen", m.Addr)
	}
	serviceAccount, err := writeServiceAccount(filepath.Join(c.Dir, "vertex-service-account.json"), "http://"+c.MockVertex.Addr+"/token")
	if err != nil {
		return nil, err
	}
	for i := 0; i < opts.Proxies; i++ {
		p := c.proc(fmt.Sprintf("proxy-%d", i), "proxy", "--configmap", ProxyNamespace+"/"+ConfigMapName,
			"--kubeconfig", env.Kubeconfig, "--drain-timeout", "10s", "--require-client-key",
			"--access-log", filepath.Join(c.Dir, fmt.Sprintf("proxy-%d-access.jsonl", i)))
		p.Addr, p.Admin = next(), next()
		p.Args = append(p.Args, "--listen", p.Addr, "--admin-listen", p.Admin)
		p.Env = append(p.Env, "POD_NAME="+p.Name)
		c.Proxies = append(c.Proxies, p)
	}
	ctrlArgs := []string{"--proxy-namespace", ProxyNamespace, "--configmap-name", ConfigMapName, "--proxy-service", "",
		"--poll-interval", opts.PollInterval.String(), "--metrics-bind-address", "0", "--health-probe-bind-address", "0"}
	for _, p := range c.Proxies {
		ctrlArgs = append(ctrlArgs, "--proxy-admin-url", "http://"+p.Admin)
	}
	c.Controller = c.proc("controller", "controller", ctrlArgs...)
	c.Controller.Env = append(c.Controller.Env, "KUBECONFIG="+env.Kubeconfig)

	for _, p := range append(append(c.mocks(), c.Controller), c.Proxies...) {
		if err := p.Start(); err != nil {
			return nil, err
		}
	}
	for _, p := range c.Proxies {
		if err := procs.WaitHTTP(ctx, "http://"+p.Admin+"/healthz", 30*time.Second, p.c); err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
	}
	for _, m := range c.mocks() {
		if err := procs.WaitHTTP(ctx, "http://"+m.Addr+"/_mock/stats", 30*time.Second, m.c); err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
	}

	var buf bytes.Buffer
	tmpl := template.Must(template.New("gateway").Parse(gatewayTemplate))
	if err := tmpl.Execute(&buf, map[string]string{"MockA": "http://" + c.MockA.Addr, "MockB": "http://" + c.MockB.Addr,
		"MockBedrock": "http://" + c.MockBedrock.Addr, "MockVertex": "http://" + c.MockVertex.Addr,
		"BedrockAccessKeyID": bedrockAccessKeyID, "BedrockSecretKey": bedrockSecretKey, "VertexServiceAccount": serviceAccount, "ClientKey": ClientKey}); err != nil {
		return nil, err
	}
	c.Manifests = filepath.Join(c.Dir, "gateway.yaml")
	if err := os.WriteFile(c.Manifests, buf.Bytes(), 0o600); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// mocks are the mock provider processes.
func (c *Cluster) mocks() []*Proc { return []*Proc{c.MockA, c.MockB, c.MockBedrock, c.MockVertex} }

func (c *Cluster) proc(name, sub string, args ...string) *Proc {
	return &Proc{Name: name, Args: append([]string{c.Bin, sub}, args...), LogPath: filepath.Join(c.Dir, name+".log")}
}

// Start starts (or restarts) the process, appending to its log.
func (p *Proc) Start() error {
	c, err := procs.Start(procs.Spec{Name: p.Name, Path: p.Args[0], Args: p.Args[1:], Env: p.Env, Log: p.LogPath, AppendLog: true})
	if err != nil {
		return err
	}
	p.c = c
	return nil
}

// Stop sends SIGTERM and waits up to limit, then kills. It returns the exit error (nil for 0).
func (p *Proc) Stop(limit time.Duration) error {
	if p == nil || p.c == nil {
		return nil
	}
	err := p.c.Stop(limit)
	p.c = nil
	return err
}

// Running reports whether the process is alive.
func (p *Proc) Running() bool { return p != nil && p.c != nil && !p.c.Exited() }

// Kubectl runs kubectl against the cluster.
func (c *Cluster) Kubectl(args ...string) (string, error) {
	out, stderr, err := c.Env.Kubectl(nil, args...)
	if err != nil {
		return out + stderr, fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr)
	}
	return out, nil
}

// Stop stops every process and the control plane.
func (c *Cluster) Stop() {
	for _, p := range append(append([]*Proc{c.Controller}, c.Proxies...), c.mocks()...) {
		_ = p.Stop(15 * time.Second)
	}
	if c.Env != nil {
		_ = c.Env.Stop()
	}
	if c.ownDir {
		_ = os.RemoveAll(c.Dir)
	}
}

// DumpLogs writes the tail of every process log and the Events, for a failed test.
func (c *Cluster) DumpLogs(w io.Writer) {
	for _, p := range append(append([]*Proc{c.Controller}, c.Proxies...), c.mocks()...) {
		if p == nil {
			continue
		}
		b, _ := os.ReadFile(p.LogPath)
		if len(b) > 12000 {
			b = b[len(b)-12000:]
		}
		fmt.Fprintf(w, "\n===== %s log (%s) =====\n%s", p.Name, p.LogPath, b)
	}
	if c.Env != nil {
		out, _ := c.Kubectl("get", "events", "-A", "--sort-by=.lastTimestamp")
		fmt.Fprintf(w, "\n===== kubectl get events -A =====\n%s", out)
	}
}

// writeServiceAccount makes a service-account key (a fresh RSA key) whose token_uri is the Vertex
// mock's token endpoint, writes it to path (0600) for the mock, and returns it for the Secret.
func writeServiceAccount(path, tokenURI string) (string, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(map[string]string{"type": "service_account", "project_id": VertexProject, "private_key_id": "dev",
		"client_email": vertexEmail, "private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "token_uri": tokenURI})
	if err != nil {
		return "", err
	}
	return string(b), os.WriteFile(path, b, 0o600)
}
