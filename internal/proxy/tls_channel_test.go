package proxy

import (
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/proxy/source"
	"github.com/switchyard-io/switchyard/internal/proxy/transport"
	"github.com/switchyard-io/switchyard/internal/routing"
	"github.com/switchyard-io/switchyard/internal/testutil"
)

// mtlsUpstream is a mock provider behind TLS with a certificate of a private CA that asks every
// client for a certificate of another private CA, as a model server inside a company does.
type mtlsUpstream struct {
	serverCA, clientCA *testutil.CA
	url                string
	handshakes         atomic.Int64 // TLS handshakes that presented a client certificate
}

func newMTLSUpstream(t *testing.T) *mtlsUpstream {
	t.Helper()
	u := &mtlsUpstream{serverCA: testutil.NewCA(t), clientCA: testutil.NewCA(t)}
	crt, key := u.serverCA.Issue(t, "model-server", false)
	pair, err := tls.X509KeyPair([]byte(crt), []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	mock := mockprovider.New(mockprovider.Options{Name: "private"})
	up := httptest.NewUnstartedServer(mock)
	up.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: u.clientCA.Pool(),
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) > 0 {
				u.handshakes.Add(1)
			}
			return nil
		}}
	up.StartTLS()
	t.Cleanup(func() { mock.Close(); up.Close() })
	u.url = up.URL
	return u
}

// yamlBlock indents a PEM text as a YAML block scalar under a key at depth spaces.
func yamlBlock(pem string, depth int) string {
	pad := strings.Repeat(" ", depth)
	return "|\n" + pad + strings.ReplaceAll(strings.TrimSpace(pem), "\n", "\n"+pad)
}

func TestChannelTLSTrustsItsCABundleAndPresentsItsClientCertificate(t *testing.T) {
	up := newMTLSUpstream(t)
	clientCrt, clientKey := up.clientCA.Issue(t, "switchyard", true)
	tlsSpec := map[string]string{
		"both":    "  tls:\n    caBundle: " + yamlBlock(up.serverCA.PEM, 6) + "\n    clientCertificateRef: {name: mtls}\n",
		"ca-only": "  tls:\n    caBundle: " + yamlBlock(up.serverCA.PEM, 6) + "\n",
		"none":    "",
	}
	manifests := func(which string) string {
		return `apiVersion: v1
kind: Secret
metadata: {name: mtls}
type: kubernetes.io/tls
stringData:
  tls.crt: ` + yamlBlock(clientCrt, 4) + `
  tls.key: ` + yamlBlock(clientKey, 4) + `
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: private}
spec:
  provider: openai
  baseURL: ` + up.url + `/v1
  models: [{name: gpt-4o}]
` + tlsSpec[which] + `---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec:
  models: [gpt-4o]
  channels: [{name: private}]
`
	}
	logs := &testutil.SyncBuffer{}
	srv := New(Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Replica: "test"})
	api := httptest.NewServer(srv.Handler())
	t.Cleanup(api.Close)
	dir := t.TempDir()
	src := &source.FileSource{Path: dir, Getenv: func(string) string { return "" }}
	load := func(which string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(manifests(which)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := src.Load(srv); err != nil {
			t.Fatalf("%s: the config does not load: %v", which, err)
		}
	}
	ask := func() (int, string) {
		t.Helper()
		resp, err := http.Post(api.URL+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	load("both")
	if code, body := ask(); code != http.StatusOK {
		t.Fatalf("with its CA bundle and client certificate: HTTP %d %s", code, body)
	}
	if up.handshakes.Load() == 0 {
		t.Fatal("the upstream saw no client certificate")
	}
	// The same table as the controller publishes it: the CA bundle travels in the ConfigMap, the
	// client key only with the credentials.
	in, err := routing.LoadManifests(dir)
	if err != nil {
		t.Fatal(err)
	}
	table, problems := routing.Compile(in)
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	enc, err := routing.EncodeTable(table)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := routing.DecodeTable(enc.Data, enc.BinaryData)
	if err != nil {
		t.Fatal(err)
	}
	published := fmt.Sprint(enc.Data, enc.BinaryData)
	if strings.Contains(published, "PRIVATE KEY") || strings.Contains(published, "tls.key") || dec.Channels[0].TLS == nil || dec.Channels[0].TLS.CABundle != table.Channels[0].TLS.CABundle {
		t.Fatalf("the published table lost the CA bundle or carries the key:\n%.400s", published)
	}

	// Without the client certificate the upstream refuses the handshake: a failed attempt, and
	// the client gets the gateway's error, not a success from another server.
	load("ca-only")
	if code, body := ask(); code < 500 || strings.Contains(body, "PRIVATE KEY") {
		t.Fatalf("without the client certificate: HTTP %d %s", code, body)
	}
	// Without the CA bundle the private CA's server is not trusted.
	load("none")
	if code, _ := ask(); code < 500 {
		t.Fatalf("without the CA bundle: HTTP %d", code)
	}
	// Back: the same settings again work at once.
	load("both")
	if code, body := ask(); code != http.StatusOK {
		t.Fatalf("after a reload with the settings back: HTTP %d %s", code, body)
	}
	if strings.Contains(logs.String(), "PRIVATE KEY") || strings.Contains(logs.String(), strings.Split(clientKey, "\n")[1]) {
		t.Error("the logs carry the client key")
	}
}

func TestChannelTransportsAreSharedAndKept(t *testing.T) {
	ca := testutil.NewCA(t)
	crt, key := ca.Issue(t, "c", true)
	table := &routing.Table{Credentials: map[string]routing.Secret{}}
	for _, name := range []string{"a", "b", "c"} {
		ch := routing.Channel{Name: name, Namespace: "llm", BaseURL: "https://x", TLS: &routing.ChannelTLS{CABundle: ca.PEM}}
		if name == "c" {
			ch.TLS.ClientCertificate = true
			table.Credentials[routing.CredentialPart(ch.ID(), routing.PartTLSCert)] = routing.NewSecret(crt)
			table.Credentials[routing.CredentialPart(ch.ID(), routing.PartTLSKey)] = routing.NewSecret(key)
		}
		table.Channels = append(table.Channels, ch)
	}
	table.Channels = append(table.Channels, routing.Channel{Name: "plain", Namespace: "llm", BaseURL: "https://y"})
	var ct transport.Channels
	first, errs := ct.Update(table)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if first["llm/a"] != first["llm/b"] || first["llm/a"] == first["llm/c"] || first["llm/plain"] != nil {
		t.Fatalf("a and b share a CA bundle and must share a transport; c has a certificate too; plain has none: %v", first)
	}
	again, _ := ct.Update(table)
	if again["llm/a"] != first["llm/a"] || again["llm/c"] != first["llm/c"] {
		t.Error("a reload with the same settings replaced the transports (and their warm connections)")
	}
	table.Credentials[routing.CredentialPart("llm/c", routing.PartTLSKey)] = routing.NewSecret("not a key")
	broken, errs := ct.Update(table)
	if len(errs) != 1 {
		t.Fatalf("errors = %v", errs)
	}
	if _, err := broken["llm/c"].RoundTrip(httptest.NewRequest(http.MethodPost, "https://x/v1/chat/completions", nil)); err == nil ||
		!strings.Contains(err.Error(), "TLS settings do not load") {
		t.Fatalf("a channel whose certificate does not load must fail its attempts, got %v", err)
	}
}
