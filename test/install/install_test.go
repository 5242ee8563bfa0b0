//go:build install

// Package install installs Switchyard on a real single-node Kubernetes (kubelet, containerd,
// kube-proxy; hack/node.sh) the two documented ways, `kubectl apply -k config/default` and
// `helm install`, and plays the on-call story of test/e2e against real pods: the controller and
// two proxy replicas from the project's image, the mock providers as pods of the same image,
// client traffic through the proxy Service's ClusterIP. Run it with `make test-install`; it runs
// inside the node's network namespace, where hack/node.sh exec puts it.
package install

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/template"
	"time"
)

const (
	sysNS   = "switchyard-system" // where both install paths put the controller and the proxies
	storyNS = "story"             // the tenant namespace of the mocks and the CRs
	release = "switchyard"        // Helm release name: objects named as in config/default
	// storyClientKey is the GatewayClient "story"'s key (testdata/story.yaml.tmpl): both installs
	// require a client key.
	storyClientKey = "sk-switchyard-install-story-7e2c9f41b8a6"
)

// The mocks' Services have fixed ClusterIPs in hack/node.sh's Service range (no cluster DNS).
var mocks = []mockSpec{{Name: "provider-a", Key: "sk-dev-provider-a", IP: "10.202.100.1"}, {Name: "provider-b", Key: "dev-provider-b-key", IP: "10.202.100.2"}}

type mockSpec struct{ Name, Key, IP string }

func (m mockSpec) url() string { return "http://" + m.IP + ":8080" }

var (
	repo  string
	image string
	helm  string
)

func TestMain(m *testing.M) {
	if os.Getenv("SWITCHYARD_NODE_NETNS") == "" || os.Getenv("KUBECONFIG") == "" {
		fmt.Fprintln(os.Stderr, "test/install needs a real node: run `make test-install` (hack/node.sh run -- go test -tags=install ./test/install/)")
		os.Exit(1)
	}
	wd, _ := os.Getwd()
	repo = filepath.Join(wd, "..", "..")
	image = os.Getenv("SWITCHYARD_INSTALL_IMAGE")
	if !strings.Contains(image, ":") {
		fmt.Fprintln(os.Stderr, "SWITCHYARD_INSTALL_IMAGE is not set to REPO:TAG (the image imported into the node; make test-install sets it)")
		os.Exit(1)
	}
	out, err := exec.Command(filepath.Join(repo, "hack", "tools.sh"), "--check", "helm").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "helm is not built: run hack/tools.sh helm (make tools)")
		os.Exit(1)
	}
	helm = strings.TrimSpace(string(out))
	os.Exit(m.Run())
}

// run runs a command with a bound on its duration and returns its combined output.
func run(limit time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = repo
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s %s: timed out after %s", name, strings.Join(args, " "), limit)
	} else if err != nil {
		err = fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return b.String(), err
}

type env struct{ t *testing.T }

func (e *env) kubectl(args ...string) string {
	e.t.Helper()
	out, err := run(2*time.Minute, "kubectl", args...)
	if err != nil {
		e.t.Fatalf("%v\n%s", err, out)
	}
	return out
}

func (e *env) try(args ...string) string {
	out, _ := run(30*time.Second, "kubectl", args...)
	return strings.TrimSpace(out)
}

func (e *env) helm(limit time.Duration, args ...string) string {
	e.t.Helper()
	out, err := run(limit, helm, args...)
	if err != nil {
		e.t.Fatalf("%v\n%s", err, out)
	}
	return out
}

func (e *env) eventually(limit time.Duration, what string, ok func() bool) time.Duration {
	e.t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > limit {
			e.t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return time.Since(start)
}

func (e *env) modelField(channel, field string) string {
	return e.try("get", "pch", channel, "-n", storyNS, "-o", `jsonpath={.status.models[?(@.name=="gpt-4o")].`+field+`}`)
}

// proxiesReporting is switchyard_controller_proxy_replicas{state="reporting"} summed over the
// controller pods' metrics endpoints (:8080 on the pod IP): only the leader polls and exports it.
func (e *env) proxiesReporting() int {
	ips := strings.Fields(e.try("get", "pods", "-n", sysNS, "-l", "app.kubernetes.io/component=controller", "-o", "jsonpath={.items[*].status.podIP}"))
	re := regexp.MustCompile(`(?m)^switchyard_controller_proxy_replicas\{[^}]*state="reporting"[^}]*\} (\S+)$`)
	n := 0
	client := &http.Client{Timeout: 5 * time.Second}
	for _, ip := range ips {
		resp, err := client.Get("http://" + ip + ":8080/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, m := range re.FindAllSubmatch(b, -1) {
			if v, err := strconv.ParseFloat(string(m[1]), 64); err == nil {
				n += int(v)
			}
		}
	}
	return n
}

// dump prints what an SRE would look at when a step fails.
func (e *env) dump() {
	for _, args := range [][]string{
		{"get", "pods", "-A", "-o", "wide"},
		{"get", "pch,rp", "-n", storyNS, "-o", "wide"},
		{"get", "events", "-A", "--sort-by=.metadata.creationTimestamp"},
		{"logs", "-n", sysNS, "-l", "app.kubernetes.io/component=controller", "--tail=40", "--prefix"},
		{"logs", "-n", sysNS, "-l", "app.kubernetes.io/component=proxy", "--tail=40", "--prefix"},
	} {
		fmt.Printf("--- kubectl %s\n%s\n", strings.Join(args, " "), e.try(args...))
	}
}

// load is a steady client: closed loop, a few workers, through the proxy Service's ClusterIP
// (kube-proxy's iptables rules pick a replica per connection).
type load struct {
	total, failed atomic.Int64
	mu            sync.Mutex
	errs          []string
	stop          chan struct{}
	wg            sync.WaitGroup
}

func startLoad(addr string, workers int) *load {
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
				body := fmt.Sprintf(`{"model":"gpt-4o","stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream)
				req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
				if err != nil {
					l.fail(err.Error())
					continue
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+storyClientKey)
				resp, err := client.Do(req)
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

func mockBehavior(t *testing.T, m mockSpec, behavior string) {
	t.Helper()
	if behavior == "" {
		behavior = "null"
	}
	resp, err := http.Post(m.url()+"/_mock/behavior", "application/json", strings.NewReader(`{"model":"gpt-4o","behavior":`+behavior+`}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("mock %s: HTTP %d", m.Name, resp.StatusCode)
	}
}

func mockCount(t *testing.T, m mockSpec) int {
	t.Helper()
	resp, err := http.Get(m.url() + "/_mock/stats")
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
	return st.Requests["gpt-4o"]
}

// readyReplicas waits until a Deployment has rolled out want ready replicas, all updated.
func (e *env) rolledOut(name string, want int) {
	e.t.Helper()
	e.eventually(3*time.Minute, fmt.Sprintf("deployment %s: %d ready replicas", name, want), func() bool {
		got := e.try("get", "deployment", name, "-n", sysNS, "-o", "jsonpath={.status.readyReplicas}/{.status.updatedReplicas}/{.status.replicas}")
		return got == fmt.Sprintf("%d/%d/%d", want, want, want)
	})
}

// checkFootprint proves what only a real node shows about the pods of both components.
func (e *env) checkPods() {
	t := e.t
	e.rolledOut("switchyard-proxy", 2)
	e.rolledOut("switchyard-controller", 2)
	// The securityContext held against the real image: non-root, read-only root filesystem.
	for _, c := range []string{"proxy", "controller"} {
		sc := e.kubectl("get", "pods", "-n", sysNS, "-l", "app.kubernetes.io/component="+c, "-o",
			`jsonpath={range .items[*]}{.spec.containers[0].securityContext.readOnlyRootFilesystem} {.spec.securityContext.runAsNonRoot} {.status.containerStatuses[0].ready}{"\n"}{end}`)
		for _, line := range strings.Split(strings.TrimSpace(sc), "\n") {
			if line != "true true true" {
				t.Errorf("%s pod: readOnlyRootFilesystem, runAsNonRoot, ready = %q, want all true", c, line)
			}
		}
	}
	// GOMAXPROCS comes from the CPU request (100m rounds up to 1), not from the node's cores.
	ip := strings.Fields(e.kubectl("get", "pods", "-n", sysNS, "-l", "app.kubernetes.io/component=proxy", "-o", "jsonpath={.items[*].status.podIP}"))[0]
	resp, err := http.Get("http://" + ip + ":9090/metrics")
	if err != nil {
		t.Fatalf("proxy admin port on the pod IP: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if m := regexp.MustCompile(`(?m)^go_sched_gomaxprocs_threads (\S+)$`).FindSubmatch(b); m == nil || string(m[1]) != "1" {
		t.Errorf("proxy GOMAXPROCS: go_sched_gomaxprocs_threads = %q, want 1 (from requests.cpu 100m)", m)
	}
	// Exactly one controller leads.
	holder := e.kubectl("get", "lease", "switchyard-controller.switchyard.io", "-n", sysNS, "-o", "jsonpath={.spec.holderIdentity}")
	if !strings.HasPrefix(holder, "switchyard-controller-") {
		t.Errorf("leader Lease held by %q, want a controller pod", holder)
	}
	// client-go's leader election records a core-group Event; the Role must allow it.
	e.eventually(time.Minute, "the LeaderElection Event", func() bool {
		return strings.Contains(e.try("get", "events", "-n", sysNS, "--field-selector", "reason=LeaderElection", "-o", "name"), "event")
	})
}

func (e *env) proxyAddr() string {
	return e.kubectl("get", "svc", "switchyard-proxy", "-n", sysNS, "-o", "jsonpath={.spec.clusterIP}") + ":8080"
}

// render writes a testdata template with the image and the mocks filled in.
func render(t *testing.T, name string) string {
	t.Helper()
	tmpl := template.Must(template.ParseFiles(filepath.Join(repo, "test", "install", "testdata", name)))
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, map[string]any{"Image": image, "Mocks": mocks}); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), strings.TrimSuffix(name, ".tmpl"))
	if err := os.WriteFile(f, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func applyStory(e *env) {
	t := e.t
	e.try("create", "namespace", storyNS)
	e.kubectl("apply", "-n", storyNS, "-f", render(t, "mocks.yaml.tmpl"))
	for _, m := range mocks {
		e.kubectl("rollout", "status", "deployment/"+m.Name, "-n", storyNS, "--timeout=2m")
		// Ready is not yet reachable: kube-proxy writes the Service's rules a moment later, and a
		// channel created before would start with connection errors (and be ejected, rightly).
		e.eventually(time.Minute, m.Name+" answering at its ClusterIP", func() bool {
			resp, err := http.Get(m.url() + "/_mock/stats")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
	}
	e.kubectl("apply", "-n", storyNS, "-f", render(t, "story.yaml.tmpl"))
	e.eventually(2*time.Minute, "RoutingPolicy chat-gpt4o Ready", func() bool {
		return e.try("get", "rp", "chat-gpt4o", "-n", storyNS, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`) == "True"
	})
	// Ready includes Programmed: every proxy replica serves the client's key hash.
	e.eventually(2*time.Minute, "GatewayClient story Ready", func() bool {
		return e.try("get", "gwc", "story", "-n", storyNS, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`) == "True"
	})
}

// story is test/e2e's core on-call story, on real pods.
func story(t *testing.T, withRestartAndFailover bool) {
	e := &env{t: t}
	addr := e.proxyAddr()
	defer func() {
		if t.Failed() {
			e.dump()
		}
	}()

	t.Run("traffic through the proxy Service reaches both channels; both replicas discovered", func(t *testing.T) {
		e.t = t
		l := startLoad(addr, 4)
		e.eventually(2*time.Minute, "both channels Healthy, seen by both proxy replicas", func() bool {
			return e.modelField("provider-a", "phase") == "Healthy" && e.modelField("provider-b", "phase") == "Healthy" &&
				// The controller found both replicas through the admin Service's EndpointSlices
				// (status counts replicas only while they disagree, so the leader's metric says it).
				e.proxiesReporting() == 2
		})
		time.Sleep(2 * time.Second)
		l.end(t, "steady traffic")
		if mockCount(t, mocks[0]) == 0 || mockCount(t, mocks[1]) == 0 {
			t.Error("traffic does not reach both mock pods")
		}
		t.Logf("kubectl get pch:\n%s", e.kubectl("get", "pch", "-n", storyNS))
	})

	t.Run("provider-a fails: zero client errors, Ejected in kubectl get pch", func(t *testing.T) {
		e.t = t
		l := startLoad(addr, 4)
		mockBehavior(t, mocks[0], `{"mode":"status","status":500}`)
		took := e.eventually(time.Minute, "provider-a Ejected in kubectl get pch", func() bool {
			return e.modelField("provider-a", "phase") == "Ejected" && strings.Contains(e.try("get", "pch", "provider-a", "-n", storyNS), "Ejected")
		})
		fmt.Printf("INSTALL FIGURE time to eject (as kubectl shows it): %s\n", took.Round(10*time.Millisecond))
		t.Logf("kubectl get pch:\n%s", e.kubectl("get", "pch", "-n", storyNS))
		l.end(t, "while provider-a fails")
		mockBehavior(t, mocks[0], "")
		e.eventually(2*time.Minute, "provider-a Healthy again", func() bool { return e.modelField("provider-a", "phase") == "Healthy" })
	})

	t.Run("kubectl patch spec.disabled: traffic moves off provider-b", func(t *testing.T) {
		e.t = t
		l := startLoad(addr, 4)
		e.kubectl("patch", "pch", "provider-b", "-n", storyNS, "--type", "merge", "-p", `{"spec":{"disabled":true,"disabledReason":"drill"}}`)
		e.eventually(30*time.Second, "provider-b Disabled", func() bool {
			return e.try("get", "pch", "provider-b", "-n", storyNS, "-o", "jsonpath={.status.phase}") == "Disabled"
		})
		// Every replica has the override once the status shows it; give in-flight requests a moment.
		time.Sleep(2 * time.Second)
		b0, a0 := mockCount(t, mocks[1]), mockCount(t, mocks[0])
		time.Sleep(3 * time.Second)
		if b1, a1 := mockCount(t, mocks[1]), mockCount(t, mocks[0]); b1 != b0 || a1 == a0 {
			t.Errorf("after the patch: provider-b got %d more requests (want 0), provider-a %d more (want some)", b1-b0, a1-a0)
		}
		e.kubectl("patch", "pch", "provider-b", "-n", storyNS, "--type", "json", "-p",
			`[{"op":"remove","path":"/spec/disabledReason"},{"op":"replace","path":"/spec/disabled","value":false}]`)
		e.eventually(2*time.Minute, "provider-b Healthy again", func() bool { return e.modelField("provider-b", "phase") == "Healthy" })
		l.end(t, "override and un-override")
	})

	if !withRestartAndFailover {
		return
	}

	t.Run("PodDisruptionBudget, then a rolling restart of the proxies under load: zero client errors", func(t *testing.T) {
		e.t = t
		l := startLoad(addr, 4)
		time.Sleep(time.Second)
		pods := strings.Fields(e.kubectl("get", "pods", "-n", sysNS, "-l", "app.kubernetes.io/component=proxy", "-o", "jsonpath={.items[*].metadata.name}"))
		if len(pods) != 2 {
			t.Fatalf("proxy pods %v, want 2", pods)
		}
		evict := func(pod string) (string, error) {
			// Not under t.TempDir(): kubectl splits -f at the commas of the subtest's name.
			f, err := os.CreateTemp("", "eviction-*.json")
			if err != nil {
				t.Fatal(err)
			}
			defer os.Remove(f.Name())
			fmt.Fprintf(f, `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":%q,"namespace":%q}}`, pod, sysNS)
			f.Close()
			return run(30*time.Second, "kubectl", "create", "--raw", "/api/v1/namespaces/"+sysNS+"/pods/"+pod+"/eviction", "-f", f.Name())
		}
		if out, err := evict(pods[0]); err != nil {
			t.Fatalf("first eviction refused: %v\n%s", err, out)
		}
		// minAvailable 1: with one replica gone, the other may not be evicted.
		if out, err := evict(pods[1]); err == nil || !strings.Contains(out, "disruption budget") {
			t.Errorf("second eviction: %v %s, want a refusal naming the disruption budget", err, out)
		}
		e.rolledOut("switchyard-proxy", 2)
		start := time.Now()
		e.kubectl("rollout", "restart", "deployment/switchyard-proxy", "-n", sysNS)
		e.kubectl("rollout", "status", "deployment/switchyard-proxy", "-n", sysNS, "--timeout=4m")
		fmt.Printf("INSTALL FIGURE rolling restart of 2 proxies: %s\n", time.Since(start).Round(100*time.Millisecond))
		// Old pods finish their preStop pause and drain after the rollout reports done.
		e.eventually(2*time.Minute, "old proxy pods gone", func() bool {
			return len(strings.Fields(e.try("get", "pods", "-n", sysNS, "-l", "app.kubernetes.io/component=proxy", "-o", "jsonpath={.items[*].metadata.name}"))) == 2
		})
		l.end(t, "eviction and rolling restart")
	})

	t.Run("controller leader failover: the standby takes the Lease and keeps reconciling", func(t *testing.T) {
		e.t = t
		lease := func() string {
			return e.try("get", "lease", "switchyard-controller.switchyard.io", "-n", sysNS, "-o", "jsonpath={.spec.holderIdentity}")
		}
		old := lease()
		leader, _, _ := strings.Cut(old, "_")
		if leader == "" {
			t.Fatalf("no leader: Lease holder %q", old)
		}
		start := time.Now()
		e.kubectl("delete", "pod", leader, "-n", sysNS, "--wait=false")
		e.eventually(time.Minute, "another controller pod holding the Lease", func() bool {
			h := lease()
			return h != "" && !strings.HasPrefix(h, leader+"_")
		})
		fmt.Printf("INSTALL FIGURE leader failover (pod deleted to new holder): %s\n", time.Since(start).Round(100*time.Millisecond))
		// The new leader writes status: an override shows up as Disabled, and is lifted again.
		e.kubectl("patch", "pch", "provider-a", "-n", storyNS, "--type", "merge", "-p", `{"spec":{"disabled":true}}`)
		e.eventually(30*time.Second, "provider-a Disabled, written by the new leader", func() bool {
			return e.try("get", "pch", "provider-a", "-n", storyNS, "-o", "jsonpath={.status.phase}") == "Disabled"
		})
		e.kubectl("patch", "pch", "provider-a", "-n", storyNS, "--type", "merge", "-p", `{"spec":{"disabled":false}}`)
		e.eventually(2*time.Minute, "provider-a Healthy again", func() bool { return e.modelField("provider-a", "phase") == "Healthy" })
		e.rolledOut("switchyard-controller", 2)
	})
}

// TestKustomize: kubectl apply -k config/default with the image pointed at the imported one.
func TestKustomize(t *testing.T) {
	e := &env{t: t}
	overlay := t.TempDir()
	// Kustomize takes bases by relative path only.
	base, err := filepath.Rel(overlay, filepath.Join(repo, "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: ghcr.io/switchyard-io/switchyard
    newName: %s
    newTag: %s
# The image is imported into the node, not pulled (there is no registry).
patches:
  - target: {kind: Deployment}
    patch: |-
      - op: add
        path: /spec/template/spec/containers/0/imagePullPolicy
        value: Never
`, base, imageName(), imageTag())
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e.try("create", "namespace", sysNS)
	e.kubectl("apply", "-k", overlay)
	e.checkPods()
	fmt.Printf("INSTALL FIGURE kubectl apply -k config/default to Ready: %s\n", time.Since(start).Round(100*time.Millisecond))
	applyStory(e)
	story(t, false)
	e.t = t
	e.kubectl("delete", "namespace", storyNS, "--timeout=2m")
	e.kubectl("delete", "-k", overlay, "--timeout=3m")
	e.kubectl("delete", "namespace", sysNS, "--ignore-not-found", "--timeout=2m")
}

// TestHelm: helm install --wait, the whole story, helm upgrade under load, helm uninstall.
func TestHelm(t *testing.T) {
	e := &env{t: t}
	start := time.Now()
	e.helm(6*time.Minute, "install", release, "charts/switchyard", "-n", sysNS, "--create-namespace", "--wait", "--timeout", "5m",
		"--set", "image.repository="+imageName(), "--set", "image.tag="+imageTag(), "--set", "image.pullPolicy=Never",
		"--set", "controller.pollInterval=1s")
	fmt.Printf("INSTALL FIGURE helm install --wait to Ready: %s\n", time.Since(start).Round(100*time.Millisecond))
	e.checkPods()
	applyStory(e)
	story(t, true)
	e.t = t
	addr := e.proxyAddr()

	t.Run("helm upgrade under load: zero client errors", func(t *testing.T) {
		e.t = t
		l := startLoad(addr, 4)
		e.helm(6*time.Minute, "upgrade", release, "charts/switchyard", "-n", sysNS, "--reuse-values", "--wait", "--timeout", "5m",
			"--set", "proxy.logLevel=debug")
		e.rolledOut("switchyard-proxy", 2)
		e.eventually(2*time.Minute, "old proxy pods gone", func() bool {
			return len(strings.Fields(e.try("get", "pods", "-n", sysNS, "-l", "app.kubernetes.io/component=proxy", "-o", "jsonpath={.items[*].metadata.name}"))) == 2
		})
		l.end(t, "helm upgrade")
		if got := e.kubectl("get", "deployment", "switchyard-proxy", "-n", sysNS, "-o", "jsonpath={.spec.template.spec.containers[0].args}"); !strings.Contains(got, "--log-level=debug") {
			t.Errorf("the upgrade did not reach the proxy Deployment: args %s", got)
		}
	})

	t.Run("helm uninstall leaves nothing behind but the CRDs", func(t *testing.T) {
		e.t = t
		e.kubectl("delete", "namespace", storyNS, "--timeout=2m")
		e.helm(4*time.Minute, "uninstall", release, "-n", sysNS, "--wait", "--timeout", "3m")
		e.eventually(2*time.Minute, "the release's pods gone", func() bool {
			return e.try("get", "pods", "-n", sysNS, "-o", "name") == ""
		})
		left := e.leftovers()
		if len(left) > 0 {
			t.Errorf("helm uninstall left behind:\n%s", strings.Join(left, "\n"))
		}
		for _, crd := range []string{"providerchannels.switchyard.io", "routingpolicies.switchyard.io"} {
			if e.try("get", "crd", crd, "-o", "name") == "" {
				t.Errorf("CRD %s is gone; the chart keeps it (crds.keep)", crd)
			}
		}
	})
}

// leftovers lists every object in switchyard-system, and every cluster-scoped object naming
// switchyard, other than what Kubernetes itself puts in a namespace and the CRDs.
func (e *env) leftovers() []string {
	types := strings.Fields(e.kubectl("api-resources", "--verbs=list", "-o", "name"))
	var left []string
	for _, ty := range types {
		if ty == "events" || ty == "events.events.k8s.io" {
			continue // Events expire on their own (an hour) and are not the release's
		}
		out := e.try("get", ty, "-A", "--ignore-not-found", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}`)
		for _, line := range strings.Split(out, "\n") {
			ns, name, _ := strings.Cut(line, "/")
			switch {
			case line == "":
			case ty == "customresourcedefinitions.apiextensions.k8s.io" && strings.HasSuffix(name, ".switchyard.io"):
			case ty == "apiservices.apiregistration.k8s.io" && strings.HasSuffix(name, ".switchyard.io"):
				// The aggregator's entry for the CRDs' group: it goes with them.
			case ty == "namespaces" && name == sysNS:
				// helm install --create-namespace makes it; Helm never deletes a namespace (its
				// contents are checked above and below).
			case ns == sysNS && (ty == "configmaps" && name == "kube-root-ca.crt" || ty == "serviceaccounts" && name == "default"):
			case ns == sysNS || strings.Contains(name, "switchyard"):
				left = append(left, ty+" "+line)
			}
		}
	}
	sort.Strings(left)
	return left
}

// imageName and imageTag split REPO:TAG (a registry port in REPO is not the tag).
func imageName() string { return image[:strings.LastIndex(image, ":")] }
func imageTag() string  { return image[strings.LastIndex(image, ":")+1:] }
