//go:build e2e

// Package e2e plays the on-call story on a real control plane: kube-apiserver and etcd, the
// controller and two proxy replicas as local processes, two mock providers. Every step is driven
// the way an SRE would (kubectl, curl) and asserted. Run it with `make test-e2e`.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/devcluster"
)

var ns = devcluster.Namespace

// load is a steady client: closed loop, a few workers, against the given proxies in turn.
type load struct {
	total, failed atomic.Int64
	mu            sync.Mutex
	errs          []string
	stop          chan struct{}
	wg            sync.WaitGroup
}

func startLoad(model string, addrs []string, workers int) *load {
	l := &load{stop: make(chan struct{})}
	client := &http.Client{Timeout: 15 * time.Second}
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func(w int) {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				stream := i%3 == 0
				body := fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, model, stream)
				addr := addrs[(w+i)%len(addrs)]
				resp, err := client.Do(chatRequest(addr, devcluster.ClientKey, body))
				l.total.Add(1)
				if err != nil {
					l.fail(err.Error())
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || (stream && !strings.Contains(string(b), "[DONE]")) {
					l.fail(fmt.Sprintf("%d %.200s", resp.StatusCode, b))
				}
				time.Sleep(40 * time.Millisecond)
			}
		}(w)
	}
	return l
}

// chatRequest is a chat completion to a proxy, with "Authorization: Bearer key" unless key is "".
// The proxies require a client key, as installed; the sample GatewayClient "dev" holds
// devcluster.ClientKey.
func chatRequest(addr, key, body string) *http.Request {
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		panic(err) // a constant URL and body: cannot fail
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return req
}

// call sends one chat completion and returns the status and the body.
func call(t *testing.T, addr, key, model string) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(chatRequest(addr, key, fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, model)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (l *load) fail(s string) {
	l.failed.Add(1)
	l.mu.Lock()
	if len(l.errs) < 5 {
		l.errs = append(l.errs, s)
	}
	l.mu.Unlock()
}

// end stops the load and fails the test on any client-visible error.
func (l *load) end(t *testing.T, what string) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	t.Logf("%s: %d requests, %d client-visible errors", what, l.total.Load(), l.failed.Load())
	if l.total.Load() == 0 {
		t.Errorf("%s: the load sent nothing", what)
	}
	if l.failed.Load() > 0 {
		t.Errorf("%s: %d client-visible errors, first: %v", what, l.failed.Load(), l.errs)
	}
}

type env struct {
	t *testing.T
	c *devcluster.Cluster
}

func (e *env) kubectl(args ...string) string {
	e.t.Helper()
	out, err := e.c.Kubectl(args...)
	if err != nil {
		e.t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// jsonpath reads one field of a ProviderChannel's or RoutingPolicy's status.
func (e *env) get(kind, name, path string) string {
	out, _ := e.c.Kubectl("get", kind, name, "-n", ns, "-o", "jsonpath="+path)
	return strings.TrimSpace(out)
}

func (e *env) modelPhase(channel, model string) string {
	return e.get("providerchannels", channel, fmt.Sprintf(`{.status.models[?(@.name=="%s")].phase}`, model))
}

func (e *env) eventually(limit time.Duration, what string, ok func() bool) time.Duration {
	e.t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > limit {
			e.t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return time.Since(start)
}

// mock steers a mock provider's behaviour for a model; nil behaviour means answer normally.
func mock(t *testing.T, p *devcluster.Proc, model, behavior string) {
	t.Helper()
	if behavior == "" {
		behavior = "null"
	}
	resp, err := http.Post("http://"+p.Addr+"/_mock/behavior", "application/json",
		strings.NewReader(fmt.Sprintf(`{"model":%q,"behavior":%s}`, model, behavior)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("mock %s: HTTP %d", p.Name, resp.StatusCode)
	}
}

func mockCount(t *testing.T, p *devcluster.Proc, model string) int {
	t.Helper()
	resp, err := http.Get("http://" + p.Addr + "/_mock/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Requests map[string]int `json:"requests"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.Requests[model]
}

func (e *env) events(channel string) string {
	out, _ := e.c.Kubectl("get", "events", "-n", ns, "--field-selector", "involvedObject.name="+channel,
		"-o", "custom-columns=REASON:.reason,MESSAGE:.message", "--sort-by=.metadata.creationTimestamp")
	return out
}

func TestOnCallStory(t *testing.T) {
	ctx := context.Background()
	c, err := devcluster.Start(ctx, devcluster.Options{Proxies: 2, PollInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	defer func() {
		if t.Failed() {
			c.DumpLogs(os.Stdout)
		}
	}()
	e := &env{t: t, c: c}
	proxies := []string{c.Proxies[0].Addr, c.Proxies[1].Addr}

	t.Run("1 apply the samples: Ready, Healthy, traffic flows", func(t *testing.T) {
		e.t = t
		// Closed as installed (--require-client-key), before any GatewayClient exists.
		for _, key := range []string{"", devcluster.ClientKey} {
			if code, body := call(t, proxies[0], key, "gpt-4o"); code != 401 {
				t.Fatalf("before any GatewayClient (key %v): %d %s, want 401", key != "", code, body)
			}
		}
		e.kubectl("apply", "-n", ns, "-f", c.Manifests)
		e.eventually(60*time.Second, "RoutingPolicy chat-gpt4o Ready", func() bool {
			return e.get("routingpolicy", "chat-gpt4o", `{.status.conditions[?(@.type=="Ready")].status}`) == "True"
		})
		l := startLoad("gpt-4o", proxies, 4)
		e.eventually(60*time.Second, "both channels Healthy", func() bool {
			return e.get("providerchannels", "provider-a", "{.status.phase}") == "Healthy" &&
				e.get("providerchannels", "provider-b", "{.status.phase}") == "Healthy"
		})
		time.Sleep(2 * time.Second)
		l.end(t, "steady traffic")
		t.Logf("kubectl get providerchannels:\n%s", e.kubectl("get", "providerchannels", "-n", ns))
		if mockCount(t, c.MockA, "gpt-4o") == 0 || mockCount(t, c.MockB, "gpt-4o") == 0 {
			t.Error("traffic does not reach both channels")
		}
		// Claude on two Anthropic channels, through the OpenAI API and the Anthropic API.
		cl := startLoad("claude-sonnet-4-5", proxies, 2)
		for i, p := range proxies {
			// The Anthropic SDK's way to send the client key: x-api-key.
			req, err := http.NewRequest(http.MethodPost, "http://"+p+"/v1/messages",
				strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("x-api-key", devcluster.ClientKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(b), `"type":"message"`) {
				t.Errorf("proxy %d /v1/messages: %d %s", i, resp.StatusCode, b)
			}
		}
		claude := []string{"claude-a", "claude-b", "claude-bedrock", "claude-vertex"}
		e.eventually(60*time.Second, "the four Claude channels Healthy", func() bool {
			for _, ch := range claude {
				if e.get("providerchannels", ch, "{.status.phase}") != "Healthy" {
					return false
				}
			}
			return true
		})
		cl.end(t, "Claude traffic")
		for ch, want := range map[string]string{"claude-a": "anthropic", "claude-bedrock": "bedrock", "claude-vertex": "vertex"} {
			if got := e.get("providerchannels", ch, "{.spec.provider}"); got != want {
				t.Errorf("%s provider %q, want %q", ch, got, want)
			}
		}
		// kubectl get pch shows a phase for a ProviderChannel of each provider.
		pch := e.kubectl("get", "pch", "-n", ns)
		t.Logf("kubectl get pch:\n%s", pch)
		for _, ch := range claude {
			if !regexp.MustCompile(`(?m)^` + ch + `\s.*\bHealthy\b`).MatchString(pch) {
				t.Errorf("kubectl get pch shows no phase for %s", ch)
			}
		}
		if mockCount(t, c.MockA, "claude-sonnet-4-5-20250929") == 0 || mockCount(t, c.MockB, "claude-sonnet-4-5-20250929") == 0 {
			t.Error("Claude traffic does not reach both Anthropic channels")
		}
		if mockCount(t, c.MockBedrock, "us.anthropic.claude-sonnet-4-5-20250929-v1:0") == 0 || mockCount(t, c.MockVertex, "claude-sonnet-4-5@20250929") == 0 {
			t.Error("Claude traffic does not reach the Bedrock and Vertex channels")
		}
	})

	t.Run("2 channel A returns 500s: zero client errors, A Ejected, Event with rule and figures", func(t *testing.T) {
		e.t = t
		l := startLoad("gpt-4o", proxies, 4)
		mock(t, c.MockA, "gpt-4o", `{"mode":"status","status":500}`)
		took := e.eventually(30*time.Second, "provider-a Ejected in kubectl", func() bool { return e.modelPhase("provider-a", "gpt-4o") == "Ejected" })
		t.Logf("time from first failure to Ejected in kubectl get providerchannels: %s", took.Round(10*time.Millisecond))
		fmt.Printf("E2E FIGURE time to eject (as kubectl shows it): %s\n", took.Round(10*time.Millisecond))
		time.Sleep(time.Second)
		l.end(t, "while A fails")
		ev := ""
		e.eventually(15*time.Second, "kubectl describe showing an Event with the rule and figures", func() bool {
			ev, _ = c.Kubectl("describe", "providerchannel", "provider-a", "-n", ns)
			return (strings.Contains(ev, "ConsecutiveFailures") || strings.Contains(ev, "ErrorRateExceeded")) &&
				(strings.Contains(ev, "consecutive failures") || strings.Contains(ev, "error rate"))
		})
		t.Logf("kubectl describe providerchannel provider-a:\n%s", ev)
	})

	t.Run("3 A recovers: Probing, RampingUp with visible steps, Healthy", func(t *testing.T) {
		e.t = t
		l := startLoad("gpt-4o", proxies, 4)
		mock(t, c.MockA, "gpt-4o", "")
		shares := map[string]bool{}
		e.eventually(90*time.Second, "provider-a Healthy again", func() bool {
			shares[e.get("providerchannels", "provider-a", `{.status.models[?(@.name=="gpt-4o")].trafficPercent}`)] = true
			return e.modelPhase("provider-a", "gpt-4o") == "Healthy"
		})
		l.end(t, "during recovery")
		t.Logf("traffic shares seen in status while ramping: %v", shares)
		if !shares["10"] && !shares["50"] {
			t.Errorf("no ramp step visible in status: %v", shares)
		}
		ev := e.events("provider-a")
		for _, want := range []string{"Probing", "RampingUp", "Healthy"} {
			if !strings.Contains(ev, want) {
				t.Errorf("the journal lacks %s:\n%s", want, ev)
			}
		}
	})

	t.Run("4 kubectl patch disabled: B gets no new requests within 2s, Disabled, Event names kubectl-patch", func(t *testing.T) {
		e.t = t
		l := startLoad("gpt-4o", proxies, 4)
		time.Sleep(time.Second)
		patched := time.Now()
		e.kubectl("patch", "providerchannel", "provider-b", "-n", ns, "--type", "merge", "-p", `{"spec":{"disabled":true,"disabledReason":"drill"}}`)
		last, lastChange := mockCount(t, c.MockB, "gpt-4o"), time.Now()
		for time.Since(patched) < 5*time.Second {
			if n := mockCount(t, c.MockB, "gpt-4o"); n != last {
				last, lastChange = n, time.Now()
			}
			time.Sleep(20 * time.Millisecond)
		}
		stopped := lastChange.Sub(patched)
		fmt.Printf("E2E FIGURE override latency (kubectl patch to B's last request): %s\n", stopped.Round(time.Millisecond))
		t.Logf("B's last request came %s after kubectl patch", stopped.Round(time.Millisecond))
		if stopped > 2*time.Second {
			t.Errorf("B still got requests %s after the patch, want under 2s", stopped)
		}
		e.eventually(10*time.Second, "status Disabled", func() bool { return e.get("providerchannels", "provider-b", "{.status.phase}") == "Disabled" })
		ev := e.events("provider-b")
		if !strings.Contains(ev, "kubectl-patch") || !strings.Contains(ev, "drill") {
			t.Errorf("no Event naming kubectl-patch and the reason:\n%s", ev)
		}
		e.kubectl("patch", "providerchannel", "provider-b", "-n", ns, "--type", "json", "-p",
			`[{"op":"remove","path":"/spec/disabledReason"},{"op":"replace","path":"/spec/disabled","value":false}]`)
		e.eventually(60*time.Second, "provider-b back to Healthy", func() bool { return e.modelPhase("provider-b", "gpt-4o") == "Healthy" })
		l.end(t, "override and un-override")
		ev = e.events("provider-b")
		if !strings.Contains(ev, "Probing") || !strings.Contains(ev, "RampingUp") {
			t.Errorf("B did not re-enter through probe and ramp:\n%s", ev)
		}
	})

	t.Run("5 a 429 storm on A: RateLimited, never Ejected, no 429 to clients", func(t *testing.T) {
		e.t = t
		before := strings.Count(e.events("provider-a"), "Ejected")
		l := startLoad("gpt-4o", proxies, 4)
		mock(t, c.MockA, "gpt-4o", `{"mode":"rate_limit","retry_after":2}`)
		e.eventually(20*time.Second, "provider-a RateLimited", func() bool { return e.modelPhase("provider-a", "gpt-4o") == "RateLimited" })
		time.Sleep(5 * time.Second)
		mock(t, c.MockA, "gpt-4o", "")
		l.end(t, "429 storm")
		if p := e.modelPhase("provider-a", "gpt-4o"); p == "Ejected" {
			t.Error("429s ejected the channel")
		}
		if after := strings.Count(e.events("provider-a"), "Ejected"); after != before {
			t.Errorf("the journal shows a new ejection during the 429 storm:\n%s", e.events("provider-a"))
		}
		e.eventually(60*time.Second, "provider-a Healthy after the storm", func() bool { return e.modelPhase("provider-a", "gpt-4o") == "Healthy" })
	})

	t.Run("6 a drill through spec.faultInjection: observed like a real fault, ends at until", func(t *testing.T) {
		e.t = t
		l := startLoad("gpt-4o", proxies, 4)
		until := time.Now().Add(8 * time.Second).UTC().Format(time.RFC3339)
		e.kubectl("patch", "providerchannel", "provider-a", "-n", ns, "--type", "merge", "-p",
			fmt.Sprintf(`{"spec":{"faultInjection":{"abortStatus":503,"percent":100,"until":%q}}}`, until))
		e.eventually(20*time.Second, "the drill ejects A", func() bool { return e.modelPhase("provider-a", "gpt-4o") == "Ejected" })
		e.eventually(90*time.Second, "A back to Healthy after the drill ended", func() bool { return e.modelPhase("provider-a", "gpt-4o") == "Healthy" })
		l.end(t, "drill")
		e.kubectl("patch", "providerchannel", "provider-a", "-n", ns, "--type", "json", "-p", `[{"op":"remove","path":"/spec/faultInjection"}]`)
	})

	t.Run("7 an invalid manifest is rejected naming the field; nothing changes", func(t *testing.T) {
		e.t = t
		before := e.kubectl("get", "routingpolicies", "-n", ns, "-o", "jsonpath={.items[*].metadata.generation}")
		bad := filepath.Join(t.TempDir(), "bad.yaml")
		os.WriteFile(bad, []byte("apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: chat-gpt4o}\nspec:\n  models: [gpt-4o]\n  channels: [{name: provider-a}]\n  recovery: {rampSteps: [50, 10, 100]}\n"), 0o600)
		out, err := c.Kubectl("apply", "-n", ns, "-f", bad)
		if err == nil {
			t.Fatal("kubectl apply accepted an invalid manifest")
		}
		t.Logf("kubectl says: %s", strings.TrimSpace(out))
		if !strings.Contains(out, "spec.recovery.rampSteps") {
			t.Errorf("the error does not name the field:\n%s", out)
		}
		if after := e.kubectl("get", "routingpolicies", "-n", ns, "-o", "jsonpath={.items[*].metadata.generation}"); after != before {
			t.Errorf("generations changed: %s -> %s", before, after)
		}
	})

	t.Run("8 reload and proxy restart under load: zero failed requests on the surviving path", func(t *testing.T) {
		e.t = t
		survivor := startLoad("gpt-4o", []string{c.Proxies[1].Addr}, 4)
		e.kubectl("patch", "providerchannel", "provider-b", "-n", ns, "--type", "merge", "-p", `{"spec":{"weight":150}}`)
		time.Sleep(2 * time.Second)
		if err := c.Proxies[0].Stop(20 * time.Second); err != nil {
			t.Errorf("proxy-0 did not exit 0 on SIGTERM: %v", err)
		}
		time.Sleep(time.Second)
		if err := c.Proxies[0].Start(); err != nil {
			t.Fatal(err)
		}
		e.eventually(30*time.Second, "proxy-0 ready again", func() bool {
			resp, err := http.Get("http://" + c.Proxies[0].Admin + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
		time.Sleep(time.Second)
		survivor.end(t, "surviving proxy during reload and restart")
		back := startLoad("gpt-4o", []string{c.Proxies[0].Addr}, 2)
		time.Sleep(2 * time.Second)
		back.end(t, "restarted proxy")
	})

	t.Run("9 residency: never a channel outside requireResidency, even the only healthy one", func(t *testing.T) {
		e.t = t
		mock(t, c.MockA, "gpt-4o-mini", `{"mode":"status","status":503}`)
		for i := 0; i < 20; i++ {
			resp, err := http.DefaultClient.Do(chatRequest(proxies[i%2], devcluster.ClientKey,
				`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
			if err == nil {
				if ch := resp.Header.Get("X-Switchyard-Channel"); ch == "provider-b" {
					t.Errorf("request %d answered by provider-b (residency us) for an eu-only policy", i)
				}
				resp.Body.Close()
			}
		}
		if n := mockCount(t, c.MockB, "gpt-4o-mini"); n != 0 {
			t.Errorf("provider-b (residency us) received %d gpt-4o-mini requests", n)
		}
		mock(t, c.MockA, "gpt-4o-mini", "")
	})

	t.Run("10 a team's GatewayClient by kubectl: 401 without or with an unknown key, 403 off its models, 200 on them", func(t *testing.T) {
		e.t = t
		const key = "sk-sy-e2e-reports-4b7f1d9a6c2e8f305d1b"
		for _, p := range proxies {
			if code, body := call(t, p, key, "gpt-4o"); code != 401 || !strings.Contains(body, "invalid_api_key") {
				t.Fatalf("the team's key before its GatewayClient exists: %d %s", code, body)
			}
		}
		f := filepath.Join(t.TempDir(), "reports.yaml")
		os.WriteFile(f, []byte(`apiVersion: v1
kind: Secret
metadata: {name: reports-keys}
stringData: {current: `+key+`}
---
apiVersion: switchyard.io/v1alpha1
kind: GatewayClient
metadata: {name: reports}
spec:
  keysSecretRef: {name: reports-keys}
  models: ["gpt-4o"]
  limits: {requestsPerMinute: 600, tokensPerMinute: 200000, tokensPerDay: 20000000}
  expiresAt: "2099-01-01T00:00:00Z"
`), 0o600)
		applied := time.Now()
		e.kubectl("apply", "-n", ns, "-f", f)
		// Both proxies take the key within seconds: the first 200 through each.
		for _, p := range proxies {
			e.eventually(30*time.Second, "the team's key accepted by "+p, func() bool { code, _ := call(t, p, key, "gpt-4o"); return code == 200 })
		}
		t.Logf("the new key works on both proxies %s after kubectl apply", time.Since(applied).Round(10*time.Millisecond))
		for i, p := range proxies {
			for _, tc := range []struct {
				what, key, model string
				status           int
				code             string
			}{
				{"no key", "", "gpt-4o", 401, "missing_api_key"},
				{"an unknown key", "sk-sy-nobody-has-this", "gpt-4o", 401, "invalid_api_key"},
				{"a model off the client's list", key, "gpt-4o-mini", 403, "model_not_allowed"},
				{"an allowed model", key, "gpt-4o", 200, ""},
			} {
				code, body := call(t, p, tc.key, tc.model)
				t.Logf("proxy-%d, %s: %d %.160s", i, tc.what, code, strings.TrimSpace(body))
				if code != tc.status || !strings.Contains(body, tc.code) {
					t.Errorf("proxy-%d, %s: %d %s, want %d %s", i, tc.what, code, body, tc.status, tc.code)
				}
			}
		}
		e.eventually(30*time.Second, "GatewayClient reports Ready with today's use in status", func() bool {
			return e.get("gatewayclient", "reports", `{.status.conditions[?(@.type=="Ready")].status}`) == "True" &&
				!slices.Contains([]string{"", "0"}, e.get("gatewayclient", "reports", "{.status.requestsToday}")) &&
				!slices.Contains([]string{"", "0"}, e.get("gatewayclient", "reports", "{.status.tokensToday}"))
		})
		out := e.kubectl("get", "gwc", "-n", ns)
		t.Logf("kubectl get gwc:\n%s", out)
		header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
		if want := []string{"NAME", "MODELS", "RPM", "TPM", "TOKENS", "TODAY", "EXPIRES", "READY", "AGE"}; !slices.Equal(header, want) {
			t.Errorf("kubectl get gwc columns %v, want %v", header, want)
		}
		if !strings.Contains(out, "reports") || !strings.Contains(out, `["gpt-4o"]`) || !strings.Contains(out, "600") || !strings.Contains(out, "2099-01-01T00:00:00Z") {
			t.Errorf("kubectl get gwc does not show the reports client's models, limits and expiry:\n%s", out)
		}
		// The key went nowhere but the requests: not upstream, not in a log.
		for _, p := range append(c.Proxies, c.MockA, c.MockB, c.Controller) {
			if b, _ := os.ReadFile(p.LogPath); strings.Contains(string(b), key) {
				t.Errorf("the client key is in the %s log", p.Name)
			}
		}
		for i := range c.Proxies {
			if b, _ := os.ReadFile(filepath.Join(c.Dir, fmt.Sprintf("proxy-%d-access.jsonl", i))); strings.Contains(string(b), key) {
				t.Errorf("the client key is in proxy-%d's access log", i)
			}
		}
	})
}
