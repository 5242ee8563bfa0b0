package demo

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// DefaultConfigDir is where the demo's manifests live in the repository.
const DefaultConfigDir = "config/samples/demo"

// findConfig returns path if it exists; for a relative path that does not, it looks for it in
// the parent directories (so the demo also runs from a subdirectory of the repository).
func findConfig(path string) (string, error) {
	if _, err := os.Stat(path); err == nil || filepath.IsAbs(path) {
		return path, err
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, path)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%s not found here or in a parent directory (run the demo from the repository, or pass --config)", path)
		}
		dir = parent
	}
}

// setup is what the demo learned from its manifests, after rewriting them.
type setup struct {
	// Dir holds the rewritten manifests the proxy runs on.
	Dir   string
	Table *routing.Table
	// Ports maps a channel name to the loopback port of its mock provider.
	Ports map[string]int
	// Models are the public models, in policy order.
	Models []string
}

// channel returns the compiled channel name.
func (s *setup) channel(name string) *routing.Channel {
	for i := range s.Table.Channels {
		if s.Table.Channels[i].Name == name {
			return &s.Table.Channels[i]
		}
	}
	return nil
}

// policyFor returns the policy that routes model.
func (s *setup) policyFor(model string) *routing.Policy {
	for i := range s.Table.Policies {
		for _, m := range s.Table.Policies[i].Models {
			if m == model {
				return &s.Table.Policies[i]
			}
		}
	}
	return nil
}

// firstChannel is the first candidate of the first policy: the channel the incident hits.
func (s *setup) firstChannel() string {
	for _, p := range s.Table.Policies {
		if len(p.Channels) > 0 {
			return p.Channels[0].Channel
		}
	}
	return ""
}

// prepareManifests reads the manifests at src, points every channel's baseURL at the loopback
// port ports[channel] (keeping its path), scales the policies' detection and recovery timings by
// scale, compiles the result (so a broken sample fails before anything starts) and writes it to
// dst/gateway.yaml.
func prepareManifests(src, dst string, ports map[string]int, scale float64) (*setup, error) {
	in, err := routing.LoadManifests(src)
	if err != nil {
		return nil, err
	}
	if len(in.Channels) == 0 || len(in.Policies) == 0 {
		return nil, fmt.Errorf("%s: the demo needs ProviderChannels and RoutingPolicies", src)
	}
	for i := range in.Channels {
		pc := &in.Channels[i]
		port, ok := ports[pc.Name]
		if !ok {
			return nil, fmt.Errorf("no mock port for channel %s", pc.Name)
		}
		u, err := url.Parse(pc.Spec.BaseURL)
		if err != nil {
			// url.Parse's error quotes the URL, credentials and all: never pass it on.
			return nil, fmt.Errorf("channel %s: spec.baseURL is not a valid URL", pc.Name)
		}
		if h := u.Hostname(); h != "127.0.0.1" && h != "localhost" && h != "::1" {
			return nil, fmt.Errorf("channel %s points at %s: the demo only runs against local mock providers", pc.Name, h)
		}
		u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		pc.Spec.BaseURL = u.String()
	}
	for i := range in.Policies {
		if err := scalePolicy(&in.Policies[i], scale); err != nil {
			return nil, err
		}
	}
	t, problems := routing.Compile(in)
	if len(problems) > 0 {
		msgs := make([]string, len(problems))
		for i, p := range problems {
			msgs[i] = p.String()
		}
		return nil, fmt.Errorf("the demo manifests do not compile: %s", strings.Join(msgs, "; "))
	}

	var buf bytes.Buffer
	buf.WriteString("# Written by `switchyard demo` from " + src + " (ports and timings substituted).\n")
	var objs []any
	for i := range in.Secrets {
		objs = append(objs, &in.Secrets[i])
	}
	for i := range in.Channels {
		objs = append(objs, &in.Channels[i])
	}
	for i := range in.Policies {
		objs = append(objs, &in.Policies[i])
	}
	for i, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(b)
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dst, "gateway.yaml"), buf.Bytes(), 0o600); err != nil {
		return nil, err
	}
	s := &setup{Dir: dst, Table: t, Ports: ports}
	for _, p := range t.Policies {
		s.Models = append(s.Models, p.Models...)
	}
	return s, nil
}

// scalePolicy writes the policy's effective timeline settings (window, recent-error window,
// ejectAfter, cooldowns, probe interval, ramp hold) explicitly, multiplied by scale. Latency
// limits are not timelines and stay as they are. With scale 1 the policy is left alone.
func scalePolicy(rp *v1alpha1.RoutingPolicy, scale float64) error {
	if scale == 1 {
		return nil
	}
	eff, err := routing.ResolvePolicy(&rp.Spec)
	if err != nil {
		return fmt.Errorf("RoutingPolicy %s: %w", rp.Name, err)
	}
	st := eff.Settings
	sc := func(d, least time.Duration) *v1alpha1.Duration {
		v := max(time.Duration(float64(d)*scale).Round(time.Millisecond), least)
		out := v1alpha1.Duration(strconv.FormatInt(v.Milliseconds(), 10) + "ms")
		return &out
	}
	spec := &rp.Spec
	if spec.Detection == nil {
		spec.Detection = &v1alpha1.Detection{}
	}
	// The engine counts in whole seconds: keep the window whole and at least 2s, and the
	// recent-error window within it.
	window := max(time.Duration(float64(st.Window)*scale).Round(time.Second), 2*time.Second)
	spec.Detection.Window = ptr(v1alpha1.Duration(window.String()))
	spec.Detection.RecentErrorWindow = sc(st.RecentErrorWindow, time.Second)
	if d, _ := spec.Detection.RecentErrorWindow.Get(); d > window {
		spec.Detection.RecentErrorWindow = ptr(v1alpha1.Duration(window.String()))
	}
	if spec.HealthScore == nil {
		spec.HealthScore = &v1alpha1.HealthScoreSpec{}
	}
	spec.HealthScore.EjectAfter = sc(st.EjectAfter, time.Second)
	if spec.Recovery == nil {
		spec.Recovery = &v1alpha1.Recovery{}
	}
	spec.Recovery.Cooldown = sc(st.Cooldown, 500*time.Millisecond)
	spec.Recovery.MaxCooldown = sc(max(st.MaxCooldown, st.Cooldown), 500*time.Millisecond)
	if spec.Recovery.Probe == nil {
		spec.Recovery.Probe = &v1alpha1.Probe{}
	}
	spec.Recovery.Probe.Interval = sc(st.ProbeInterval, 200*time.Millisecond)
	spec.Recovery.RampHold = sc(st.RampHold, 500*time.Millisecond)
	if _, err := routing.ResolvePolicy(spec); err != nil {
		return errors.Join(fmt.Errorf("RoutingPolicy %s with timings scaled by %g", rp.Name, scale), err)
	}
	return nil
}
