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
				resp, err := client.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(body))
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
			resp, err := http.Post("http://"+p+"/v1/messages", "application/json",
				strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(b), `"type":"message"`) {
				t.Errorf("proxy %d /v1/messages: %d %s", i, resp.StatusCode, b)
			}
		}
		e.eventually(60*time.Second, "both Claude channels Healthy", func() bool {
			return e.get("providerchannels", "claude-a", "{.status.phase}") == "Healthy" &&
				e.get("providerchannels", "claude-b", "{.status.phase}") == "Healthy"
		})
		cl.end(t, "Claude traffic")
		if got := e.get("providerchannels", "claude-a", "{.spec.provider}"); got != "anthropic" {
			t.Errorf("claude-a provider %q", got)
		}
		t.Logf("kubectl get pch:\n%s", e.kubectl("get", "pch", "-n", ns))
		if mockCount(t, c.MockA, "claude-sonnet-4-5-20250929") == 0 || mockCount(t, c.MockB, "claude-sonnet-4-5-20250929") == 0 {
			t.Error("Claude traffic does not reach both Anthropic channels")
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
			resp, err := http.Post("http://"+proxies[i%2]+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
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
}
