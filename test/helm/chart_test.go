package helm

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const (
	defaultNS  = "switchyard-helm"
	allOptsNS  = "switchyard-helm-all"
	runbookURL = "https://github.com/switchyard-io/switchyard#on-call-runbook"
)

// The chart carries copies of generated or shared files; each must equal its one source.
// `make manifests` refreshes them (see the Makefile); this test is what catches a forgotten copy.
func TestChartCopiesMatchTheirSources(t *testing.T) {
	pairs := map[string]string{
		"charts/switchyard/files/rbac/role.yaml":                 "config/rbac/role.yaml",
		"charts/switchyard/files/rbac/personas.yaml":             "config/rbac/personas.yaml",
		"charts/switchyard/files/rbac/oncall_policy.yaml":        "config/rbac/oncall_policy.yaml",
		"charts/switchyard/files/monitoring/prometheusrule.yaml": "config/monitoring/prometheusrule.yaml",
		"charts/switchyard/files/dashboards/switchyard.json":     "config/monitoring/grafana/switchyard.json",
	}
	sources, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(sources) == 0 {
		t.Fatalf("no CRDs in config/crd/bases (%v)", err)
	}
	for _, s := range sources {
		pairs["charts/switchyard/files/crds/"+filepath.Base(s)] = "config/crd/bases/" + filepath.Base(s)
	}
	copies, _ := filepath.Glob(filepath.Join(chartDir(), "files", "crds", "*.yaml"))
	for _, c := range copies {
		if _, ok := pairs["charts/switchyard/files/crds/"+filepath.Base(c)]; !ok {
			t.Errorf("charts/switchyard/files/crds/%s has no source in config/crd/bases: delete it (make manifests)", filepath.Base(c))
		}
	}
	for cp, src := range pairs {
		want, err := os.ReadFile(filepath.Join(root, src))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, cp))
		if err != nil {
			t.Errorf("%s: %v; copy it from %s (make manifests)", cp, err, src)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s: run `make manifests` (or copy it) and commit both", cp, src)
		}
	}
}

func TestLint(t *testing.T) {
	for name, values := range map[string][]string{"default": nil, "all-options": {testdata("all-options.yaml")}} {
		t.Run(name, func(t *testing.T) {
			args := []string{"lint", chartDir(), "--strict"}
			for _, v := range values {
				args = append(args, "--values", v)
			}
			if out, err := runHelm(args...); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// installMonitoringCRDs installs the stand-in ServiceMonitor and PrometheusRule CRDs for real and
// waits until the API server serves them.
func installMonitoringCRDs(t *testing.T) {
	t.Helper()
	kubectl(t, "", "apply", "-f", testdata("monitoring-crds.yaml"))
	kubectl(t, "", "wait", "--for=condition=Established", "--timeout=60s",
		"crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com")
	// Discovery may lag behind Established for a moment.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _, err := env.Kubectl(nil, "api-resources", "--api-group=monitoring.coreos.com", "-o", "name")
		if err == nil && strings.Contains(out, "servicemonitors") && strings.Contains(out, "prometheusrules") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("monitoring.coreos.com kinds not served: %s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// dryRun applies manifests with a server-side dry run (strict field validation, kubectl's default)
// and checks every object was accepted.
func dryRun(t *testing.T, objs objects) {
	t.Helper()
	out := kubectl(t, objs.yaml(), "apply", "--dry-run=server", "--validate=strict", "-f", "-")
	for _, o := range objs {
		name := "/" + o.Name + " "
		if !strings.Contains(out, name) {
			t.Errorf("the dry run does not mention %s/%s:\n%s", o.Kind, o.Name, out)
		}
	}
}

func TestDefaultValuesDryRunServer(t *testing.T) {
	ensureNamespaces(t, defaultNS)
	objs := parse(t, render(t, "switchyard", defaultNS, nil))
	for _, want := range []string{
		"CustomResourceDefinition/providerchannels.switchyard.io", "CustomResourceDefinition/routingpolicies.switchyard.io", "CustomResourceDefinition/gatewayclients.switchyard.io",
		"Deployment/switchyard-controller", "Deployment/switchyard-proxy",
		"Service/switchyard-proxy", "Service/switchyard-proxy-admin", "Service/switchyard-controller-metrics",
		"ServiceAccount/switchyard-controller", "ServiceAccount/switchyard-proxy",
		"ClusterRole/switchyard-controller-" + defaultNS, "ClusterRoleBinding/switchyard-controller-" + defaultNS,
		"Role/switchyard-controller", "RoleBinding/switchyard-controller",
		"Role/switchyard-proxy", "RoleBinding/switchyard-proxy",
		"PodDisruptionBudget/switchyard-proxy",
		"ClusterRole/switchyard-view-" + defaultNS, "ClusterRole/switchyard-edit-" + defaultNS, "ClusterRole/switchyard-oncall-" + defaultNS,
		"ValidatingAdmissionPolicy/switchyard-oncall-override-only-" + defaultNS, "ValidatingAdmissionPolicyBinding/switchyard-oncall-override-only-" + defaultNS,
		// Rendered empty, filled by the controller: they belong to the release, so helm uninstall removes them.
		"ConfigMap/switchyard-routing", "Secret/switchyard-routing-credentials", "Lease/switchyard-controller.switchyard.io",
	} {
		kind, name, _ := strings.Cut(want, "/")
		if !objs.has(kind, name) {
			t.Errorf("default render lacks %s; it has %v", want, objs.names())
		}
	}
	for _, kind := range []string{"HorizontalPodAutoscaler", "NetworkPolicy", "ServiceMonitor", "PrometheusRule"} {
		if len(objs.ofKind(kind)) > 0 {
			t.Errorf("default render has a %s; it is optional and off by default", kind)
		}
	}
	if cms := objs.ofKind("ConfigMap"); len(cms) != 1 {
		t.Errorf("default render has %d ConfigMaps, want only the routing one (the dashboard's is off by default)", len(cms))
	}
	// CRDs first: they are installed already (testenv), so this dry-runs an update of them.
	dryRun(t, objs)
}

func TestAllOptionsDryRunServer(t *testing.T) {
	installMonitoringCRDs(t)
	ensureNamespaces(t, allOptsNS, "team-a", "team-b", "monitoring")
	objs := parse(t, render(t, "sy", allOptsNS, []string{testdata("all-options.yaml")}))
	for _, kind := range []string{"HorizontalPodAutoscaler", "NetworkPolicy", "ServiceMonitor", "PrometheusRule", "ConfigMap", "PodDisruptionBudget"} {
		if len(objs.ofKind(kind)) == 0 {
			t.Errorf("all-options render has no %s", kind)
		}
	}
	for _, cr := range objs.ofKind("ClusterRole") {
		if strings.Contains(cr.Name, "controller") {
			t.Errorf("with controller.watchNamespaces the controller must get no ClusterRole, got %s", cr.Name)
		}
	}
	dryRun(t, objs)
}

func TestMonitoringKustomizeDryRunServer(t *testing.T) {
	installMonitoringCRDs(t)
	ensureNamespaces(t, "switchyard-system")
	objs := parse(t, kubectl(t, "", "kustomize", filepath.Join(root, "config", "monitoring")))
	var cm corev1.ConfigMap
	objs.get(t, "ConfigMap", "switchyard-grafana-dashboard", &cm)
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v, want grafana_dashboard: \"1\"", cm.Labels)
	}
	src, err := os.ReadFile(filepath.Join(root, "config", "monitoring", "grafana", "switchyard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["switchyard.json"] != string(src) {
		t.Errorf("dashboard ConfigMap data differs from config/monitoring/grafana/switchyard.json")
	}
	for _, want := range []string{"ServiceMonitor/switchyard-proxy", "ServiceMonitor/switchyard-controller", "PrometheusRule/switchyard"} {
		kind, name, _ := strings.Cut(want, "/")
		if !objs.has(kind, name) {
			t.Errorf("config/monitoring lacks %s", want)
		}
	}
	dryRun(t, objs)
}

// container returns the named container of a Deployment.
func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %s", d.Name, name)
	return corev1.Container{}
}

// flagValue returns the value of --name=value among args, and whether it is there.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name {
			return "", true
		}
	}
	return "", false
}

func TestRenderedWiring(t *testing.T) {
	cases := []struct {
		name, release, ns string
		values            []string
		// Expected object names.
		fullname, routing string
	}{
		{"default", "switchyard", defaultNS, nil, "switchyard", "switchyard-routing"},
		{"release name", "prod", defaultNS, nil, "prod-switchyard", "prod-switchyard-routing"},
		{"all-options", "sy", allOptsNS, []string{testdata("all-options.yaml")}, "gateway", "llm-routing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := parse(t, render(t, tc.release, tc.ns, tc.values))
			proxyName, ctrlName, adminName := tc.fullname+"-proxy", tc.fullname+"-controller", tc.fullname+"-proxy-admin"

			var proxy, ctrl appsv1.Deployment
			objs.get(t, "Deployment", proxyName, &proxy)
			objs.get(t, "Deployment", ctrlName, &ctrl)
			pc, cc := container(t, &proxy, "proxy"), container(t, &ctrl, "controller")
			if pc.Args[0] != "proxy" || cc.Args[0] != "controller" {
				t.Fatalf("subcommands: proxy %q, controller %q", pc.Args[0], cc.Args[0])
			}

			// The proxy reads the ConfigMap the controller writes, and the Secret beside it.
			if v, _ := flagValue(pc.Args, "configmap"); v != "$(POD_NAMESPACE)/"+tc.routing {
				t.Errorf("proxy --configmap=%s, want $(POD_NAMESPACE)/%s", v, tc.routing)
			}
			if v, _ := flagValue(cc.Args, "configmap-name"); v != tc.routing {
				t.Errorf("controller --configmap-name=%s, want %s", v, tc.routing)
			}
			if v, _ := flagValue(cc.Args, "proxy-service"); v != adminName {
				t.Errorf("controller --proxy-service=%s, want the admin Service %s", v, adminName)
			}
			for _, c := range []corev1.Container{pc, cc} {
				found := false
				for _, e := range c.Env {
					found = found || (e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace")
				}
				if !found {
					t.Errorf("container %s does not get POD_NAMESPACE from the downward API", c.Name)
				}
			}
			// The proxy's Go scheduler is sized by its CPU request, not the node's cores (all-options
			// sets its own GOMAXPROCS: TestAllOptionsProperties).
			if tc.values == nil && !hasGOMAXPROCSFromRequest(pc.Env) {
				t.Errorf("proxy env %+v: no GOMAXPROCS from requests.cpu", pc.Env)
			}

			// The proxy's Role names exactly those two objects.
			var role rbacv1.Role
			objs.get(t, "Role", proxyName, &role)
			want := []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{tc.routing}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{tc.routing + "-credentials"}, Verbs: []string{"get", "list", "watch"}},
			}
			if !reflect.DeepEqual(role.Rules, want) {
				t.Errorf("proxy Role rules %+v, want %+v", role.Rules, want)
			}

			// Ports: the API on 8080 on the client Service and nothing else there; the admin API
			// (no authentication) on 9090 on the admin Service, always ClusterIP (all-options asks
			// for a LoadBalancer client Service), named as the controller expects.
			var svc, adminSvc corev1.Service
			objs.get(t, "Service", proxyName, &svc)
			objs.get(t, "Service", adminName, &adminSvc)
			ports, adminPorts := servicePorts(t, svc), servicePorts(t, adminSvc)
			if !reflect.DeepEqual(ports, map[string]int32{"http": 8080}) {
				t.Errorf("client Service %s ports %v, want only http 8080", proxyName, ports)
			}
			if !reflect.DeepEqual(adminPorts, map[string]int32{"admin": 9090}) {
				t.Errorf("admin Service %s ports %v, want only admin 9090", adminName, adminPorts)
			}
			if adminSvc.Spec.Type != corev1.ServiceTypeClusterIP {
				t.Errorf("admin Service type %s, want ClusterIP whatever proxy.service.type is (client Service: %s)", adminSvc.Spec.Type, svc.Spec.Type)
			}
			for _, s := range objs.ofKind("Service") {
				var other corev1.Service
				objs.get(t, "Service", s.Name, &other)
				for _, p := range other.Spec.Ports {
					if s.Name != adminName && p.TargetPort.String() == "admin" {
						t.Errorf("Service %s exposes the admin port (%s)", s.Name, p.Name)
					}
				}
			}
			adminPort, _ := flagValue(cc.Args, "proxy-admin-port-name")
			if _, ok := adminPorts[adminPort]; !ok {
				t.Errorf("controller --proxy-admin-port-name=%s is not a port of Service %s", adminPort, adminName)
			}
			cports := map[string]int32{}
			for _, p := range pc.Ports {
				cports[p.Name] = p.ContainerPort
			}
			if listen, _ := flagValue(pc.Args, "listen"); listen != ":"+strconv.Itoa(int(cports["http"])) {
				t.Errorf("proxy --listen=%s, container port http %d", listen, cports["http"])
			}
			if admin, _ := flagValue(pc.Args, "admin-listen"); admin != ":"+strconv.Itoa(int(cports["admin"])) {
				t.Errorf("proxy --admin-listen=%s, container port admin %d", admin, cports["admin"])
			}
			for _, s := range []corev1.Service{svc, adminSvc} {
				if !selects(s.Spec.Selector, proxy.Spec.Template.Labels) || selects(s.Spec.Selector, ctrl.Spec.Template.Labels) {
					t.Errorf("Service %s selector %v does not select exactly the proxy pods", s.Name, s.Spec.Selector)
				}
			}

			// Graceful termination outlasts the preStop pause plus the drain timeout.
			drainArg, _ := flagValue(pc.Args, "drain-timeout")
			drain, err := time.ParseDuration(drainArg)
			if err != nil {
				t.Fatalf("proxy --drain-timeout=%q: %v", drainArg, err)
			}
			var preStop time.Duration
			if l := pc.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
				preStop = time.Duration(l.PreStop.Sleep.Seconds) * time.Second
			}
			grace := proxy.Spec.Template.Spec.TerminationGracePeriodSeconds
			if grace == nil || time.Duration(*grace)*time.Second <= drain+preStop {
				t.Errorf("proxy terminationGracePeriodSeconds %v must exceed --drain-timeout %s plus preStop %s", grace, drain, preStop)
			}
			if p := pc.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != "admin" {
				t.Errorf("proxy readiness probe %+v, want GET /readyz on admin", p)
			}

			// Spread constraints always select the proxies.
			for _, c := range proxy.Spec.Template.Spec.TopologySpreadConstraints {
				if c.LabelSelector == nil || !selects(c.LabelSelector.MatchLabels, proxy.Spec.Template.Labels) {
					t.Errorf("topology spread constraint %s does not select the proxy pods: %+v", c.TopologyKey, c.LabelSelector)
				}
			}

			// Leader election: on with more than one replica.
			if _, on := flagValue(cc.Args, "leader-elect"); *ctrl.Spec.Replicas > 1 && !on {
				t.Errorf("controller has %d replicas without --leader-elect", *ctrl.Spec.Replicas)
			}

			// The controller's rules are the generated ones (config/rbac/role.yaml).
			genCluster, genRole := generatedRules(t)
			var cr rbacv1.Role
			objs.get(t, "Role", ctrlName, &cr)
			if !reflect.DeepEqual(cr.Rules, genRole) {
				t.Errorf("controller Role rules differ from config/rbac/role.yaml:\n got %+v\nwant %+v", cr.Rules, genRole)
			}
			var crs []string // the controller's; the personas' roles (switchyard-view, ...) are people's
			for _, cr := range objs.ofKind("ClusterRole") {
				if strings.Contains(cr.Name, "controller") {
					crs = append(crs, cr.Name)
				}
			}
			if len(crs) > 0 {
				var c rbacv1.ClusterRole
				objs.get(t, "ClusterRole", crs[0], &c)
				if !reflect.DeepEqual(c.Rules, genCluster) {
					t.Errorf("controller ClusterRole rules differ from config/rbac/role.yaml:\n got %+v\nwant %+v", c.Rules, genCluster)
				}
			} else {
				for _, r := range objs.ofKind("Role") {
					if !strings.HasSuffix(r.Name, "-watch") {
						continue
					}
					var w rbacv1.Role
					if err := yaml.Unmarshal(r.Raw, &w); err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(w.Rules, genCluster) {
						t.Errorf("controller Role %s/%s rules differ from the generated ClusterRole", r.Namespace, r.Name)
					}
				}
			}
		})
	}
}

// servicePorts returns a Service's ports by name; each must target the container port of its name.
func servicePorts(t *testing.T, svc corev1.Service) map[string]int32 {
	t.Helper()
	ports := map[string]int32{}
	for _, p := range svc.Spec.Ports {
		ports[p.Name] = p.Port
		if p.TargetPort.String() != p.Name {
			t.Errorf("Service %s port %s targets %s", svc.Name, p.Name, p.TargetPort.String())
		}
	}
	return ports
}

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

// generatedRules reads config/rbac/role.yaml (controller-gen's output): the ClusterRole's rules and
// the Role's.
func generatedRules(t *testing.T) (cluster, namespaced []rbacv1.PolicyRule) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		var r struct {
			Kind  string              `json:"kind"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatal(err)
		}
		switch r.Kind {
		case "ClusterRole":
			cluster = r.Rules
		case "Role":
			namespaced = r.Rules
		}
	}
	if cluster == nil || namespaced == nil {
		t.Fatalf("config/rbac/role.yaml lacks the ClusterRole or the Role")
	}
	return cluster, namespaced
}

func TestAllOptionsProperties(t *testing.T) {
	objs := parse(t, render(t, "sy", allOptsNS, []string{testdata("all-options.yaml")}))

	var proxy appsv1.Deployment
	objs.get(t, "Deployment", "gateway-proxy", &proxy)
	if proxy.Spec.Replicas != nil {
		t.Errorf("with autoscaling the Deployment must leave replicas to the HPA, has %d", *proxy.Spec.Replicas)
	}
	pc := container(t, &proxy, "proxy")
	if pc.Image != "registry.example.com/switchyard@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" {
		t.Errorf("image %s, want the digest", pc.Image)
	}
	// A GOMAXPROCS of the user's replaces the one derived from the CPU request.
	var gomaxprocs []string
	for _, e := range pc.Env {
		if e.Name == "GOMAXPROCS" {
			gomaxprocs = append(gomaxprocs, e.Value)
		}
	}
	if !slices.Equal(gomaxprocs, []string{"3"}) {
		t.Errorf("proxy GOMAXPROCS values %q, want only the user's \"3\"", gomaxprocs)
	}
	for _, want := range []string{"--drain-timeout=60s", "--access-log=-", "--max-body-bytes=20971520", "--log-level=warn", "--tick=500ms", "--allow-anonymous",
		"--audit-log=-", "--audit-required=false"} {
		if !slices.Contains(pc.Args, want) {
			t.Errorf("proxy args %v lack %s", pc.Args, want)
		}
	}
	if g := *proxy.Spec.Template.Spec.TerminationGracePeriodSeconds; g != 90 {
		t.Errorf("terminationGracePeriodSeconds %d, want 90", g)
	}
	// A constraint with its own selector keeps it.
	if c := proxy.Spec.Template.Spec.TopologySpreadConstraints[1]; c.LabelSelector.MatchLabels["tier"] != "data" {
		t.Errorf("user labelSelector replaced: %+v", c.LabelSelector)
	}

	var ctrl appsv1.Deployment
	objs.get(t, "Deployment", "gateway-controller", &ctrl)
	cc := container(t, &ctrl, "controller")
	for _, want := range []string{"--watch-namespace=team-a", "--watch-namespace=team-b", "--poll-interval=2s", "--proxy-admin-url=http://10.0.0.5:9090", "--leader-elect"} {
		if !slices.Contains(cc.Args, want) {
			t.Errorf("controller args %v lack %s", cc.Args, want)
		}
	}
	if ctrl.Spec.Template.Spec.ServiceAccountName != "switchyard-ctl" {
		t.Errorf("controller ServiceAccount %s", ctrl.Spec.Template.Spec.ServiceAccountName)
	}
	// Roles in each watched namespace and the release namespace, no ClusterRole.
	var watched []string
	for _, r := range objs.ofKind("Role") {
		if strings.HasSuffix(r.Name, "-watch") {
			watched = append(watched, r.Namespace)
		}
	}
	slices.Sort(watched)
	if want := []string{allOptsNS, "team-a", "team-b"}; !slices.Equal(watched, want) {
		t.Errorf("controller watch Roles in %v, want %v", watched, want)
	}

	var hpa autoscalingv2.HorizontalPodAutoscaler
	objs.get(t, "HorizontalPodAutoscaler", "gateway-proxy", &hpa)
	if hpa.Spec.ScaleTargetRef.Name != "gateway-proxy" || *hpa.Spec.MinReplicas != 3 || hpa.Spec.MaxReplicas != 20 || len(hpa.Spec.Metrics) != 2 {
		t.Errorf("HPA %+v", hpa.Spec)
	}

	// NetworkPolicy: API from the listed peers, admin only from the controller and the listed peers.
	var np networkingv1.NetworkPolicy
	objs.get(t, "NetworkPolicy", "gateway-proxy", &np)
	if !selects(np.Spec.PodSelector.MatchLabels, proxy.Spec.Template.Labels) {
		t.Errorf("NetworkPolicy does not select the proxies")
	}
	if len(np.Spec.Ingress) != 2 {
		t.Fatalf("NetworkPolicy ingress %+v", np.Spec.Ingress)
	}
	api, admin := np.Spec.Ingress[0], np.Spec.Ingress[1]
	if api.Ports[0].Port.String() != "http" || len(api.From) != 2 {
		t.Errorf("API rule %+v", api)
	}
	if admin.Ports[0].Port.String() != "admin" || len(admin.From) != 2 ||
		!selects(admin.From[0].PodSelector.MatchLabels, ctrl.Spec.Template.Labels) || admin.From[0].NamespaceSelector != nil {
		t.Errorf("admin rule %+v, want the controller pods first, then adminFrom", admin)
	}

	// ServiceMonitors point at ports that exist on Services they select.
	type sm struct {
		Spec struct {
			Selector  struct{ MatchLabels map[string]string } `json:"selector"`
			Endpoints []struct {
				Port        string `json:"port"`
				Relabelings []struct {
					TargetLabel string `json:"targetLabel"`
					Replacement string `json:"replacement"`
				} `json:"relabelings"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	jobs := map[string]string{"gateway-proxy": "switchyard-proxy", "gateway-controller": "switchyard-controller"}
	services := map[string]corev1.Service{}
	for _, s := range objs.ofKind("Service") {
		var svc corev1.Service
		objs.get(t, "Service", s.Name, &svc)
		services[s.Name] = svc
	}
	selectedBy := map[string][]string{"gateway-proxy": {"gateway-proxy-admin"}, "gateway-controller": {"gateway-controller-metrics"}}
	for name, job := range jobs {
		var m sm
		objs.get(t, "ServiceMonitor", name, &m)
		matched := false
		var selected []string
		for _, svc := range services {
			if !selects(m.Spec.Selector.MatchLabels, svc.Labels) {
				continue
			}
			matched = true
			selected = append(selected, svc.Name)
			for _, e := range m.Spec.Endpoints {
				found := false
				for _, p := range svc.Spec.Ports {
					found = found || p.Name == e.Port
				}
				if !found {
					t.Errorf("ServiceMonitor %s scrapes port %s, which Service %s lacks", name, e.Port, svc.Name)
				}
				if len(e.Relabelings) != 1 || e.Relabelings[0].TargetLabel != "job" || e.Relabelings[0].Replacement != job {
					t.Errorf("ServiceMonitor %s must pin job=%s (the alerts select on it): %+v", name, job, e.Relabelings)
				}
			}
		}
		if !matched {
			t.Errorf("ServiceMonitor %s selects no Service", name)
		}
		if !slices.Equal(selected, selectedBy[name]) {
			t.Errorf("ServiceMonitor %s selects Services %v, want %v", name, selected, selectedBy[name])
		}
	}

	// The alerts: the source's, minus the disabled one, with the extra label.
	var pr, src promRule
	objs.get(t, "PrometheusRule", "gateway", &pr)
	readYAML(t, filepath.Join(root, "config", "monitoring", "prometheusrule.yaml"), &src)
	var want []promGroup
	for _, g := range src.Spec.Groups {
		var rules []map[string]any
		for _, r := range g.Rules {
			if r["alert"] == "SwitchyardControllerDown" {
				continue
			}
			labels := map[string]any{}
			if l, ok := r["labels"].(map[string]any); ok {
				for k, v := range l {
					labels[k] = v
				}
			}
			labels["team"] = "platform"
			r["labels"] = labels
			rules = append(rules, r)
		}
		want = append(want, promGroup{Name: g.Name, Rules: rules})
	}
	if !reflect.DeepEqual(pr.Spec.Groups, want) {
		got, _ := json.MarshalIndent(pr.Spec.Groups, "", " ")
		exp, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("PrometheusRule groups differ:\n got %s\nwant %s", got, exp)
	}
	if pr.Metadata.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("PrometheusRule labels %v", pr.Metadata.Labels)
	}

	// The dashboard, in Grafana's namespace, byte for byte.
	var cm corev1.ConfigMap
	objs.get(t, "ConfigMap", "gateway-grafana-dashboard", &cm)
	dash, err := os.ReadFile(filepath.Join(root, "config", "monitoring", "grafana", "switchyard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cm.Namespace != "monitoring" || cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "Switchyard" {
		t.Errorf("dashboard ConfigMap %s/%s labels %v annotations %v", cm.Namespace, cm.Name, cm.Labels, cm.Annotations)
	}
	if strings.TrimRight(cm.Data["switchyard.json"], "\n") != strings.TrimRight(string(dash), "\n") {
		t.Errorf("dashboard ConfigMap data differs from config/monitoring/grafana/switchyard.json")
	}

	// CRDs without the keep annotation when crds.keep=false.
	for _, c := range objs.ofKind("CustomResourceDefinition") {
		var crd apiextensionsv1.CustomResourceDefinition
		objs.get(t, "CustomResourceDefinition", c.Name, &crd)
		if _, ok := crd.Annotations["helm.sh/resource-policy"]; ok {
			t.Errorf("CRD %s keeps helm.sh/resource-policy with crds.keep=false", c.Name)
		}
	}
}

type promGroup struct {
	Name  string           `json:"name"`
	Rules []map[string]any `json:"rules"`
}

type promRule struct {
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Groups []promGroup `json:"groups"`
	} `json:"spec"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// The rendered CRDs carry exactly the generated spec; only labels and annotations are added.
func TestCRDs(t *testing.T) {
	objs := parse(t, render(t, "switchyard", defaultNS, nil))
	crds := objs.ofKind("CustomResourceDefinition")
	sources, _ := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if len(crds) != len(sources) || len(crds) == 0 {
		t.Fatalf("rendered %d CRDs, config/crd/bases has %d", len(crds), len(sources))
	}
	for _, s := range sources {
		var want apiextensionsv1.CustomResourceDefinition
		readYAML(t, s, &want)
		var got apiextensionsv1.CustomResourceDefinition
		objs.get(t, "CustomResourceDefinition", want.Name, &got)
		if !reflect.DeepEqual(got.Spec, want.Spec) {
			t.Errorf("rendered CRD %s has another spec than %s", want.Name, s)
		}
		if got.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s lacks helm.sh/resource-policy: keep (crds.keep defaults to true)", want.Name)
		}
		for k, v := range want.Annotations {
			if got.Annotations[k] != v {
				t.Errorf("CRD %s lost annotation %s=%s", want.Name, k, v)
			}
		}
		if got.Labels["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("CRD %s labels %v", want.Name, got.Labels)
		}
	}
	off := parse(t, render(t, "switchyard", defaultNS, nil, "crds.enabled=false"))
	if n := len(off.ofKind("CustomResourceDefinition")); n != 0 {
		t.Errorf("crds.enabled=false still renders %d CRDs", n)
	}
}

// The alerts rendered with prometheusRule.enabled and nothing else are the source's, unchanged.
func TestPrometheusRuleIsTheSource(t *testing.T) {
	objs := parse(t, render(t, "switchyard", defaultNS, nil, "prometheusRule.enabled=true"))
	var got, want promRule
	objs.get(t, "PrometheusRule", "switchyard", &got)
	readYAML(t, filepath.Join(root, "config", "monitoring", "prometheusrule.yaml"), &want)
	if !reflect.DeepEqual(got.Spec, want.Spec) {
		t.Errorf("rendered PrometheusRule spec differs from config/monitoring/prometheusrule.yaml")
	}
}

// The values schema rejects typos and nonsense; the templates refuse unsafe combinations.
func TestValuesRejected(t *testing.T) {
	cases := []struct {
		name string
		sets []string
		want string // in helm's error
	}{
		{"misspelt top-level key", []string{"proxyy.replicas=3"}, "proxyy"},
		{"misspelt nested key", []string{"proxy.replcas=3"}, "replcas"},
		{"misspelt deep key", []string{"proxy.autoscaling.minReplica=3"}, "minReplica"},
		{"misspelt resources key", []string{"proxy.resources.request.cpu=1"}, "request"},
		{"misspelt monitoring key", []string{"serviceMonitor.intervall=1m"}, "intervall"},
		{"misspelt security context key", []string{"controller.securityContext.readOnlyRootFS=true"}, "readOnlyRootFS"},
		{"unknown log level", []string{"controller.logLevel=verbose"}, "logLevel"},
		{"bad duration", []string{"controller.pollInterval=5 seconds"}, "pollInterval"},
		{"wrong type", []string{"proxy.replicas=two"}, "replicas"},
		{"extra arg not a flag", []string{"proxy.extraArgs[0]=tick=1s"}, "extraArgs"},
		{"grace not longer than the drain", []string{"proxy.terminationGracePeriodSeconds=30"}, "terminationGracePeriodSeconds"},
		{"autoscaling min above max", []string{"proxy.autoscaling.enabled=true", "proxy.autoscaling.minReplicas=5", "proxy.autoscaling.maxReplicas=3"}, "minReplicas"},
		{"service account name missing", []string{"proxy.serviceAccount.create=false"}, "proxy.serviceAccount.name"},
		{"fleet store password in the URL", []string{"fleet.redis.url=redis://:hunter2@redis:6379/0"}, "url"},
		{"fleet store not a Redis URL", []string{"fleet.redis.url=http://redis:6379"}, "url"},
		{"fleet password Secret without a name", []string{"fleet.redis.url=redis://redis:6379", "fleet.redis.passwordSecretRef.key=pw"}, "name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", "switchyard", chartDir(), "--namespace", defaultNS}
			for _, s := range tc.sets {
				args = append(args, "--set", s)
			}
			_, err := runHelm(args...)
			if err == nil {
				t.Fatalf("helm template --set %v succeeded, want an error about %s", tc.sets, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error does not name %s:\n%v", tc.want, err)
			}
		})
	}
}

// Installs the default render for real (but the CRDs, which testenv owns) and asks the API server
// what each identity may do: the proxy exactly its two objects, the controller what
// config/rbac/role.yaml grants; and with watchNamespaces, nothing outside them.
func TestLeastPrivilege(t *testing.T) {
	const ns = "switchyard-rbac"
	ensureNamespaces(t, ns, "llm", "team-a", "team-b")
	objs := parse(t, render(t, "sy", ns, nil))
	kubectl(t, objs.yaml("CustomResourceDefinition"), "apply", "-f", "-")
	env.CheckLeastPrivilege(t, ns, "sy-switchyard-proxy", "sy-switchyard-controller", "sy-switchyard-routing")

	// With watchNamespaces: the same access, only in team-a and team-b (and the release namespace).
	const nsW = "switchyard-rbac-watch"
	ensureNamespaces(t, nsW)
	objs = parse(t, render(t, "sy", nsW, nil, "controller.watchNamespaces={team-a,team-b}"))
	kubectl(t, objs.yaml("CustomResourceDefinition"), "apply", "-f", "-")
	controller := "system:serviceaccount:" + nsW + ":sy-switchyard-controller"
	canI(t, []canICase{
		{controller, []string{"list", "providerchannels.switchyard.io", "-n", "team-a"}, true},
		{controller, []string{"watch", "secrets", "-n", "team-b"}, true},
		{controller, []string{"create", "events.events.k8s.io", "-n", "team-a"}, true},
		{controller, []string{"list", "providerchannels.switchyard.io", "-n", nsW}, true},
		{controller, []string{"list", "providerchannels.switchyard.io", "-n", "llm"}, false},
		{controller, []string{"watch", "secrets", "-n", "llm"}, false},
		{controller, []string{"list", "providerchannels.switchyard.io", "-A"}, false},
		{controller, []string{"patch", "configmaps/sy-switchyard-routing", "-n", nsW}, true},
	})
}

type canICase struct {
	as   string
	args []string
	want bool
}

func canI(t *testing.T, cases []canICase) {
	t.Helper()
	for _, tc := range cases {
		args := append([]string{"auth", "can-i", "--as=" + tc.as}, tc.args...)
		out, _, _ := env.Kubectl(nil, args...) // can-i exits 1 for "no"
		if got := strings.TrimSpace(out) == "yes"; got != tc.want {
			t.Errorf("%s can %s: %v, want %v", tc.as, strings.Join(tc.args, " "), got, tc.want)
		}
	}
}

// NOTES.txt tells how to send the first request and where to look, with names kubectl resolves.
func TestNotes(t *testing.T) {
	installMonitoringCRDs(t) // helm maps every kind through the API server, even in a client-side dry run
	// crds.enabled=false: even a client-side dry run refuses to take over the CRDs testenv installed.
	out, err := runHelm("install", "switchyard", chartDir(), "--dry-run=client", "--namespace", defaultNS,
		"--set", "serviceMonitor.enabled=true", "--set", "networkPolicy.enabled=true", "--set", "crds.enabled=false")
	if err != nil {
		t.Fatal(err)
	}
	_, notes, ok := strings.Cut(out, "NOTES:")
	if !ok {
		t.Fatalf("no NOTES in:\n%s", out)
	}
	t.Logf("NOTES:%s", notes)
	for _, want := range []string{
		"kubectl get providerchannels -n " + defaultNS,
		"port-forward svc/switchyard-proxy 8080:8080",
		"/v1/chat/completions",
		"http://switchyard-proxy." + defaultNS + ".svc:8080/v1",
		"port-forward svc/switchyard-proxy-admin 9090:9090",
		"/admin/v1/channels",
		runbookURL,
		"networkPolicy.adminFrom", // the warning: Prometheus cannot scrape through the NetworkPolicy
		// proxy.requireClientKey is on by default: the first request needs a GatewayClient's key.
		`"kind":"GatewayClient"`,
		"create secret generic my-team-keys",
		`-H "Authorization: Bearer $KEY"`,
		// Two controller replicas by default: the leader's log, not whichever pod deploy/ picks.
		"get lease switchyard-controller.switchyard.io -o jsonpath='{.spec.holderIdentity}'",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES lack %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "svc/switchyard-proxy 9090") {
		t.Errorf("NOTES reach the admin port through the client Service, which does not carry it:\n%s", notes)
	}
	if regexp.MustCompile(`kubectl get pc\b`).MatchString(notes) {
		t.Errorf("NOTES use `kubectl get pc`, which kubectl resolves to PriorityClass")
	}
}

// The stand-in monitoring CRDs have teeth: under strict field validation a misspelt field fails.
func TestMonitoringStandInsAreStrict(t *testing.T) {
	installMonitoringCRDs(t)
	ensureNamespaces(t, defaultNS)
	for name, manifest := range map[string]string{
		"ServiceMonitor": `apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: typo, namespace: ` + defaultNS + `}
spec:
  selector: {matchLabels: {a: b}}
  endpoints: [{port: admin, intervall: 30s}]
`,
		"PrometheusRule": `apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: typo, namespace: ` + defaultNS + `}
spec:
  groups: [{name: g, rules: [{alert: A, expr: up == 0, fro: 5m}]}]
`,
	} {
		out, errOut, err := env.Kubectl(strings.NewReader(manifest), "apply", "--dry-run=server", "--validate=strict", "-f", "-")
		if err == nil || !strings.Contains(errOut, "unknown field") {
			t.Errorf("%s with a misspelt field was accepted: %s%s", name, out, errOut)
		}
	}
}

// values.yaml is documented line by line: every key (outside list items) has a comment right above it.
func TestValuesDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	keyRE := regexp.MustCompile(`^(\s*)([A-Za-z_][A-Za-z0-9_.\-/]*):`)
	prevComment := false
	listIndent := -1 // inside a list item's lines when >= 0
	for i, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		indent := len(line) - len(strings.TrimLeft(line, " "))
		switch {
		case trimmed == "":
			prevComment = false
			continue
		case strings.HasPrefix(trimmed, "#"):
			prevComment = true
			continue
		case strings.HasPrefix(trimmed, "- "):
			listIndent = indent
			prevComment = false
			continue
		}
		if listIndent >= 0 && indent > listIndent {
			continue
		}
		listIndent = -1
		if m := keyRE.FindStringSubmatch(line); m != nil && !prevComment {
			t.Errorf("values.yaml:%d: %s has no comment above it", i+1, m[2])
		}
		prevComment = false
	}
}

// Smaller combinations render, and the API server accepts them.
func TestVariantsDryRunServer(t *testing.T) {
	installMonitoringCRDs(t)
	ensureNamespaces(t, defaultNS)
	cases := []struct {
		name    string
		sets    []string
		has     []string // kind/name that must be rendered
		hasNot  []string // kinds that must not be
		checkFn func(t *testing.T, objs objects)
	}{
		{
			name: "one proxy replica: no PDB", sets: []string{"proxy.replicas=1"},
			hasNot: []string{"PodDisruptionBudget"},
		},
		{
			name: "PDB as a percentage", sets: []string{"proxy.podDisruptionBudget.minAvailable=50%"},
			has: []string{"PodDisruptionBudget/v1-switchyard-proxy"},
		},
		{
			name: "HPA on memory only", sets: []string{"proxy.autoscaling.enabled=true", "proxy.autoscaling.targetCPUUtilizationPercentage=null", "proxy.autoscaling.targetMemoryUtilizationPercentage=75"},
			has: []string{"HorizontalPodAutoscaler/v1-switchyard-proxy", "PodDisruptionBudget/v1-switchyard-proxy"},
		},
		{
			name: "no controller metrics, monitoring on", sets: []string{"controller.metrics.enabled=false", "serviceMonitor.enabled=true", "prometheusRule.enabled=true", "grafanaDashboard.enabled=true"},
			has:    []string{"ServiceMonitor/v1-switchyard-proxy", "PrometheusRule/v1-switchyard", "ConfigMap/v1-switchyard-grafana-dashboard"},
			hasNot: []string{"Service/v1-switchyard-controller-metrics"},
			checkFn: func(t *testing.T, objs objects) {
				if objs.has("ServiceMonitor", "v1-switchyard-controller") {
					t.Errorf("a controller ServiceMonitor without a metrics Service")
				}
				var d appsv1.Deployment
				objs.get(t, "Deployment", "v1-switchyard-controller", &d)
				if v, _ := flagValue(container(t, &d, "controller").Args, "metrics-bind-address"); v != "0" {
					t.Errorf("--metrics-bind-address=%s, want 0 (off)", v)
				}
			},
		},
		{
			name: "no preStop, single controller, existing service accounts",
			sets: []string{"proxy.preStopSleepSeconds=0", "controller.replicas=1", "controller.leaderElection.enabled=false",
				"controller.serviceAccount.create=false", "controller.serviceAccount.name=default",
				"proxy.serviceAccount.create=false", "proxy.serviceAccount.name=default"},
			hasNot: []string{"ServiceAccount"},
			checkFn: func(t *testing.T, objs objects) {
				var d appsv1.Deployment
				objs.get(t, "Deployment", "v1-switchyard-proxy", &d)
				if d.Spec.Template.Spec.Containers[0].Lifecycle != nil {
					t.Errorf("preStop rendered with preStopSleepSeconds=0")
				}
				if g := *d.Spec.Template.Spec.TerminationGracePeriodSeconds; g != 40 {
					t.Errorf("terminationGracePeriodSeconds %d, want 0+25+15", g)
				}
			},
		},
		{
			name: "NetworkPolicy with defaults", sets: []string{"networkPolicy.enabled=true"},
			has: []string{"NetworkPolicy/v1-switchyard-proxy"},
			checkFn: func(t *testing.T, objs objects) {
				// The API port is open; the admin port admits the controller's pods of the release
				// namespace (a podSelector without a namespaceSelector) and nothing else.
				var np networkingv1.NetworkPolicy
				var proxy, ctrl appsv1.Deployment
				objs.get(t, "NetworkPolicy", "v1-switchyard-proxy", &np)
				objs.get(t, "Deployment", "v1-switchyard-proxy", &proxy)
				objs.get(t, "Deployment", "v1-switchyard-controller", &ctrl)
				if !selects(np.Spec.PodSelector.MatchLabels, proxy.Spec.Template.Labels) || !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
					t.Errorf("NetworkPolicy selects %v for %v; want the proxy pods' ingress", np.Spec.PodSelector, np.Spec.PolicyTypes)
				}
				seen := map[string]bool{}
				for _, rule := range np.Spec.Ingress {
					for _, p := range rule.Ports {
						seen[p.Port.String()] = true
						switch p.Port.String() {
						case "http":
							if len(rule.From) != 0 {
								t.Errorf("API port restricted by default: %+v", rule.From)
							}
						case "admin":
							if len(rule.From) != 1 || rule.From[0].NamespaceSelector != nil || rule.From[0].IPBlock != nil ||
								rule.From[0].PodSelector == nil || !selects(rule.From[0].PodSelector.MatchLabels, ctrl.Spec.Template.Labels) {
								t.Errorf("admin port admits %+v by default; want only the controller's pods in the release namespace", rule.From)
							}
						default:
							t.Errorf("unexpected port %s in the NetworkPolicy", p.Port.String())
						}
					}
				}
				if !seen["http"] || !seen["admin"] {
					t.Errorf("NetworkPolicy covers ports %v, want http and admin", seen)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := parse(t, render(t, "v1", defaultNS, nil, append(tc.sets, "crds.enabled=false")...))
			for _, h := range tc.has {
				kind, name, _ := strings.Cut(h, "/")
				if !objs.has(kind, name) {
					t.Errorf("no %s in %v", h, objs.names())
				}
			}
			for _, h := range tc.hasNot {
				kind, name, _ := strings.Cut(h, "/")
				for _, o := range objs.ofKind(kind) {
					if name == "" || o.Name == name {
						t.Errorf("%s/%s rendered", o.Kind, o.Name)
					}
				}
			}
			if tc.checkFn != nil {
				tc.checkFn(t, objs)
			}
			dryRun(t, objs)
		})
	}
}

func hasGOMAXPROCSFromRequest(env []corev1.EnvVar) bool {
	for _, e := range env {
		if e.Name == "GOMAXPROCS" && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil &&
			e.ValueFrom.ResourceFieldRef.Resource == "requests.cpu" && e.ValueFrom.ResourceFieldRef.Divisor.String() == "1" {
			return true
		}
	}
	return false
}

// The proxy listens on every interface (:8080) in the cluster, where it refuses to start without
// client keys unless --allow-anonymous says that is meant: requireClientKey true passes
// --require-client-key, false passes --allow-anonymous, never both.
func TestProxyKeysOrAnonymousIsExplicit(t *testing.T) {
	for _, tc := range []struct {
		sets      []string
		want, not string
	}{
		{nil, "--require-client-key", "--allow-anonymous"},
		{[]string{"proxy.requireClientKey=false"}, "--allow-anonymous", "--require-client-key"},
	} {
		objs := parse(t, render(t, "switchyard", defaultNS, nil, tc.sets...))
		var proxy appsv1.Deployment
		objs.get(t, "Deployment", "switchyard-proxy", &proxy)
		pc := container(t, &proxy, "proxy")
		if !slices.Contains(pc.Args, "--listen=:8080") || !slices.Contains(pc.Args, tc.want) || slices.Contains(pc.Args, tc.not) {
			t.Errorf("--set %v: proxy args %v, want --listen=:8080 and %s, not %s", tc.sets, pc.Args, tc.want, tc.not)
		}
	}
}

// Without fleet values the proxy judges alone (no --fleet-* flag); with them it gets the store's
// URL, interval and name as flags and the password from the Secret as an environment variable,
// never in its args.
func TestProxyFleetValues(t *testing.T) {
	objs := parse(t, render(t, "switchyard", defaultNS, nil))
	var proxy appsv1.Deployment
	objs.get(t, "Deployment", "switchyard-proxy", &proxy)
	for _, a := range container(t, &proxy, "proxy").Args {
		if strings.HasPrefix(a, "--fleet-") {
			t.Errorf("default values render %s", a)
		}
	}
	objs = parse(t, render(t, "switchyard", defaultNS, nil, "fleet.redis.url=rediss://switchyard@redis.llm:6380/2",
		"fleet.redis.passwordSecretRef.name=fleet-redis", "fleet.syncInterval=500ms"))
	objs.get(t, "Deployment", "switchyard-proxy", &proxy)
	pc := container(t, &proxy, "proxy")
	for flag, want := range map[string]string{"fleet-redis": "rediss://switchyard@redis.llm:6380/2", "fleet-sync-interval": "500ms",
		"fleet-name": defaultNS + "/switchyard-proxy"} {
		if v, ok := flagValue(pc.Args, flag); !ok || v != want {
			t.Errorf("--%s=%q, want %q (args %v)", flag, v, want, pc.Args)
		}
	}
	var env *corev1.EnvVar
	for i := range pc.Env {
		if pc.Env[i].Name == "SWITCHYARD_FLEET_REDIS_PASSWORD" {
			env = &pc.Env[i]
		}
	}
	if env == nil || env.Value != "" || env.ValueFrom == nil || env.ValueFrom.SecretKeyRef == nil ||
		env.ValueFrom.SecretKeyRef.Name != "fleet-redis" || env.ValueFrom.SecretKeyRef.Key != "password" {
		t.Errorf("the fleet password env: %+v, want it from Secret fleet-redis key password", env)
	}
}
