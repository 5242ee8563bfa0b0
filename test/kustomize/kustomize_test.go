// Package kustomize checks the deployment manifests in config/ against a real kube-apiserver:
// `kubectl apply -k config/default --dry-run=server` succeeds (kubectl's built-in kustomize, the
// CRDs and the API server's validation all agree), the rendered objects keep the properties the
// proxy and the controller rely on, and the two identities get exactly the access they need, in
// config/default and in config/namespaced (the controller limited to its watched namespaces).
package kustomize

import (
	"bufio"
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/switchyard-io/switchyard/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, "kustomize", &env) }

const ns = "switchyard-system"

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := env.Kubectl(nil, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func configDir(parts ...string) string {
	return filepath.Join(append([]string{env.Root, "config"}, parts...)...)
}

// ensureNamespace creates the namespace for real: a server-side dry run does not create the
// Namespace in the same apply, and everything else in it would fail with "namespace not found".
func ensureNamespace(t *testing.T) {
	t.Helper()
	err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func TestDefaultAppliesDryRunServer(t *testing.T) {
	ensureNamespace(t)
	out := kubectl(t, "apply", "-k", configDir("default"), "--dry-run=server")
	for _, want := range []string{
		"customresourcedefinition.apiextensions.k8s.io/providerchannels.switchyard.io",
		"deployment.apps/switchyard-controller",
		"deployment.apps/switchyard-proxy",
		"service/switchyard-proxy",
		"service/switchyard-proxy-admin",
		"service/switchyard-controller-metrics",
		"clusterrole.rbac.authorization.k8s.io/switchyard-controller",
		"role.rbac.authorization.k8s.io/switchyard-proxy",
		"networkpolicy.networking.k8s.io/switchyard-proxy",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry-run output lacks %s:\n%s", want, out)
		}
	}
}

func TestSamplesApplyDryRunServer(t *testing.T) {
	ensureNamespace(t)
	kubectl(t, "apply", "-n", ns, "-f", configDir("samples"), "--dry-run=server")
}

// object is one rendered manifest.
type object struct {
	Kind, Namespace, Name string
	Raw                   []byte
}

// renderObjects returns what `kubectl kustomize dir` renders, in order.
func renderObjects(t *testing.T, dir string) []object {
	t.Helper()
	var objs []object
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(kubectl(t, "kustomize", dir))))
	for {
		doc, err := r.Read()
		if err != nil {
			break
		}
		var meta struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil || meta.Kind == "" {
			continue
		}
		objs = append(objs, object{Kind: meta.Kind, Namespace: meta.Metadata.Namespace, Name: meta.Metadata.Name, Raw: doc})
	}
	return objs
}

// rendered returns the objects `kubectl kustomize config/default` renders, by kind/name.
func rendered(t *testing.T) map[string][]byte {
	t.Helper()
	return renderedDir(t, configDir("default"))
}

// renderedDir returns the objects `kubectl kustomize dir` renders, by kind/name (the last one
// wins when two namespaces hold the same kind and name).
func renderedDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	objs := map[string][]byte{}
	for _, o := range renderObjects(t, dir) {
		objs[o.Kind+"/"+o.Name] = o.Raw
	}
	return objs
}

func TestProxyManifests(t *testing.T) {
	objs := rendered(t)
	var d appsv1.Deployment
	if err := yaml.Unmarshal(objs["Deployment/switchyard-proxy"], &d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("proxy replicas %v, want 2", d.Spec.Replicas)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != "admin" {
		t.Errorf("proxy readiness probe %+v, want GET /readyz on the admin port", p)
	}
	admin := 0
	for _, p := range c.Ports {
		if p.Name == "admin" {
			admin = int(p.ContainerPort)
		}
	}
	if admin != 9090 {
		t.Errorf("proxy admin port %d, want 9090", admin)
	}
	gomaxprocs := false
	for _, e := range c.Env {
		gomaxprocs = gomaxprocs || (e.Name == "GOMAXPROCS" && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil &&
			e.ValueFrom.ResourceFieldRef.Resource == "requests.cpu")
	}
	if !gomaxprocs {
		t.Errorf("proxy env %+v: no GOMAXPROCS from requests.cpu (the Go scheduler would size itself by the node's cores)", c.Env)
	}
	drain := 0
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--drain-timeout="); ok {
			fmt.Sscanf(v, "%ds", &drain)
		}
		if v, ok := strings.CutPrefix(a, "--configmap="); ok && v != "$(POD_NAMESPACE)/switchyard-routing" {
			t.Errorf("proxy --configmap=%s", v)
		}
	}
	preStop := 0
	if l := c.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
		preStop = int(l.PreStop.Sleep.Seconds)
	}
	grace := d.Spec.Template.Spec.TerminationGracePeriodSeconds
	if drain == 0 || grace == nil || int(*grace) <= drain+preStop {
		t.Errorf("terminationGracePeriodSeconds %v must exceed the drain timeout %ds plus preStop %ds", grace, drain, preStop)
	}
}

// The client Service carries the API port only; the admin port (admin API and /metrics, no
// authentication) is on a ClusterIP Service of its own, which the controller is pointed at.
func TestAdminPortIsNotOnTheClientService(t *testing.T) {
	objs := rendered(t)
	var proxy, ctrl appsv1.Deployment
	for name, d := range map[string]*appsv1.Deployment{"switchyard-proxy": &proxy, "switchyard-controller": &ctrl} {
		if err := yaml.Unmarshal(objs["Deployment/"+name], d); err != nil {
			t.Fatal(err)
		}
	}
	services := servicesIn(t, objs)
	client, admin := services["switchyard-proxy"], services["switchyard-proxy-admin"]
	if got := servicePorts(client); !reflect.DeepEqual(got, map[string]int32{"http": 8080}) {
		t.Errorf("client Service switchyard-proxy ports %v, want only http 8080", got)
	}
	if got := servicePorts(admin); !reflect.DeepEqual(got, map[string]int32{"admin": 9090}) {
		t.Errorf("admin Service switchyard-proxy-admin ports %v, want only admin 9090", got)
	}
	if admin.Spec.Type != "" && admin.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("admin Service type %s, want ClusterIP", admin.Spec.Type)
	}
	for _, svc := range []corev1.Service{client, admin} {
		if !selects(svc.Spec.Selector, proxy.Spec.Template.Labels) || selects(svc.Spec.Selector, ctrl.Spec.Template.Labels) {
			t.Errorf("Service %s selector %v does not select exactly the proxy pods", svc.Name, svc.Spec.Selector)
		}
	}
	// No other Service reaches the admin container port.
	for name, svc := range services {
		for _, p := range svc.Spec.Ports {
			if name != "switchyard-proxy-admin" && (p.TargetPort.String() == "admin" || p.TargetPort.IntValue() == 9090) {
				t.Errorf("Service %s exposes the admin port (%s)", name, p.Name)
			}
		}
	}

	// The controller discovers the replicas through the admin Service and its admin port.
	args := ctrl.Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--proxy-service=switchyard-proxy-admin") || !slices.Contains(args, "--proxy-admin-port-name=admin") {
		t.Errorf("controller args %v, want --proxy-service=switchyard-proxy-admin --proxy-admin-port-name=admin", args)
	}
}

// config/monitoring's proxy ServiceMonitor selects the admin Service, and no Service without the
// port it scrapes.
func TestServiceMonitorScrapesTheAdminService(t *testing.T) {
	services := servicesIn(t, rendered(t))
	monitors := renderedDir(t, configDir("monitoring"))
	want := map[string]string{"switchyard-proxy": "switchyard-proxy-admin", "switchyard-controller": "switchyard-controller-metrics"}
	for monitor, wantSvc := range want {
		var m struct {
			Spec struct {
				Selector  metav1.LabelSelector `json:"selector"`
				Endpoints []struct {
					Port string `json:"port"`
				} `json:"endpoints"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(monitors["ServiceMonitor/"+monitor], &m); err != nil {
			t.Fatal(err)
		}
		var selected []string
		for name, svc := range services {
			if !selects(m.Spec.Selector.MatchLabels, svc.Labels) {
				continue
			}
			selected = append(selected, name)
			for _, e := range m.Spec.Endpoints {
				if _, ok := servicePorts(svc)[e.Port]; !ok {
					t.Errorf("ServiceMonitor %s scrapes port %s, which Service %s lacks", monitor, e.Port, name)
				}
			}
		}
		if !slices.Equal(selected, []string{wantSvc}) {
			t.Errorf("ServiceMonitor %s selects Services %v, want [%s]", monitor, selected, wantSvc)
		}
	}
}

// servicesIn returns the rendered Services by name.
func servicesIn(t *testing.T, objs map[string][]byte) map[string]corev1.Service {
	t.Helper()
	services := map[string]corev1.Service{}
	for key, doc := range objs {
		if name, ok := strings.CutPrefix(key, "Service/"); ok {
			var svc corev1.Service
			if err := yaml.Unmarshal(doc, &svc); err != nil {
				t.Fatal(err)
			}
			services[name] = svc
		}
	}
	return services
}

func servicePorts(svc corev1.Service) map[string]int32 {
	ports := map[string]int32{}
	for _, p := range svc.Spec.Ports {
		ports[p.Name] = p.Port
	}
	return ports
}

// selects reports whether a non-empty label selector matches labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestLeastPrivilege applies config/default for real and asks the API server what each identity
// may do.
func TestLeastPrivilege(t *testing.T) {
	ensureNamespace(t)
	kubectl(t, "apply", "-k", configDir("default"))
	env.CheckLeastPrivilege(t, ns, "switchyard-proxy", "switchyard-controller", "switchyard-routing")
}

// The admin port (admin API and /metrics, no authentication) is reachable only from pods in the
// proxy's namespace; the API port from anywhere.
func TestProxyNetworkPolicyKeepsTheAdminPortInTheNamespace(t *testing.T) {
	var np networkingv1.NetworkPolicy
	if err := yaml.Unmarshal(rendered(t)["NetworkPolicy/switchyard-proxy"], &np); err != nil {
		t.Fatal(err)
	}
	if np.Namespace != ns || np.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"] != "proxy" {
		t.Fatalf("NetworkPolicy %s/%s selects %v", np.Namespace, np.Name, np.Spec.PodSelector)
	}
	seen := map[string]bool{}
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			port := p.Port.String()
			seen[port] = true
			switch port {
			case "http":
				if len(rule.From) != 0 {
					t.Errorf("the API port is restricted to %v; clients come from anywhere", rule.From)
				}
			case "admin":
				if len(rule.From) != 1 || rule.From[0].NamespaceSelector != nil || rule.From[0].IPBlock != nil ||
					rule.From[0].PodSelector == nil || len(rule.From[0].PodSelector.MatchLabels)+len(rule.From[0].PodSelector.MatchExpressions) != 0 {
					t.Errorf("the admin port admits %+v; want every pod of this namespace and nothing else", rule.From)
				}
			default:
				t.Errorf("unexpected port %s", port)
			}
		}
	}
	if !seen["http"] || !seen["admin"] {
		t.Errorf("ports covered: %v", seen)
	}
}
