package kustomize

import (
	"context"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/switchyard-io/switchyard/internal/controller"
)

// The controller's ServiceAccount as RBAC knows it.
const controllerSA = "system:serviceaccount:" + ns + ":switchyard-controller"

func decode(t *testing.T, objs []object, kind, namespace, name string, into any) {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && o.Namespace == namespace && o.Name == name {
			if err := yaml.Unmarshal(o.Raw, into); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no %s %s/%s among the rendered objects", kind, namespace, name)
}

// watchedNamespaces are the --watch-namespace values config/namespaced gives the controller, and
// the rendered Deployment.
func watchedNamespaces(t *testing.T, objs []object) ([]string, appsv1.Deployment) {
	t.Helper()
	var d appsv1.Deployment
	decode(t, objs, "Deployment", ns, "switchyard-controller", &d)
	var watched []string
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--watch-namespace="); ok {
			watched = append(watched, v)
		}
	}
	if len(watched) == 0 {
		t.Fatalf("config/namespaced gives the controller no --watch-namespace: %v", d.Spec.Template.Spec.Containers[0].Args)
	}
	return watched, d
}

// config/namespaced is config/default with the cluster-wide Secret read taken out of the
// generated ClusterRole, and nothing else taken out.
func TestNamespacedClusterRoleLosesOnlyTheSecretRead(t *testing.T) {
	objs := renderObjects(t, configDir("namespaced"))
	var got rbacv1.ClusterRole
	decode(t, objs, "ClusterRole", "", "switchyard-controller", &got)
	var want []rbacv1.PolicyRule
	for _, r := range generatedClusterRules(t) {
		if !slices.Contains(r.Resources, "secrets") {
			want = append(want, r)
		}
	}
	if !reflect.DeepEqual(got.Rules, want) {
		t.Errorf("config/namespaced ClusterRole rules\n got %+v\nwant the generated ones without Secrets: %+v", got.Rules, want)
	}
	// Everything else is config/default's.
	def := renderObjects(t, configDir("default"))
	for _, o := range def {
		found := false
		for _, n := range objs {
			found = found || (n.Kind == o.Kind && n.Namespace == o.Namespace && n.Name == o.Name)
		}
		if !found {
			t.Errorf("config/namespaced lacks %s %s/%s of config/default", o.Kind, o.Namespace, o.Name)
		}
	}
}

// generatedClusterRules reads the ClusterRole's rules from config/rbac/role.yaml (controller-gen's).
func generatedClusterRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	b, err := os.ReadFile(configDir("rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		var r rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind == "ClusterRole" {
			return r.Rules
		}
	}
	t.Fatal("config/rbac/role.yaml has no ClusterRole")
	return nil
}

// TestNamespacedSecretAccess applies config/namespaced for real: the controller's ServiceAccount
// may read Secrets in each watched namespace and its own, not in another namespace nor cluster-wide,
// and keeps every other right of config/default. Then a controller running as that ServiceAccount,
// with the overlay's flags, compiles a channel's key from a watched namespace: the Roles grant no
// less than it reads.
func TestNamespacedSecretAccess(t *testing.T) {
	ensureNamespace(t)
	const other = "team-x"
	for _, n := range []string{"llm", other} {
		if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	objs := renderObjects(t, configDir("namespaced"))
	watched, d := watchedNamespaces(t, objs)
	kubectl(t, "apply", "-k", configDir("namespaced"))
	t.Cleanup(func() {
		// Leave config/default's RBAC as TestLeastPrivilege expects it, whatever the order.
		kubectl(t, "delete", "-f", configDir("namespaced", "secrets_rbac.yaml"), "--ignore-not-found")
		kubectl(t, "apply", "-k", configDir("rbac"))
	})

	type check struct {
		args []string
		want bool
	}
	var checks []check
	for _, n := range append(slices.Clone(watched), ns) {
		for _, verb := range []string{"get", "list", "watch"} {
			checks = append(checks, check{[]string{verb, "secrets", "-n", n}, true})
		}
	}
	for _, verb := range []string{"get", "list", "watch"} {
		checks = append(checks,
			check{[]string{verb, "secrets", "-n", other}, false},
			check{[]string{verb, "secrets", "-A"}, false})
	}
	checks = append(checks,
		check{[]string{"create", "secrets", "-n", "llm"}, false},
		// Channels, policies, their status and Events stay in the ClusterRole.
		check{[]string{"list", "providerchannels.switchyard.io", "-n", other}, true},
	)
	for _, c := range checks {
		out, _, _ := env.Kubectl(nil, append([]string{"auth", "can-i", "--as=" + controllerSA}, c.args...)...) // can-i exits 1 for "no"
		if got := strings.TrimSpace(out) == "yes"; got != c.want {
			t.Errorf("%s can %s: %v, want %v", controllerSA, strings.Join(c.args, " "), got, c.want)
		}
	}
	// Every other right config/default gives the two identities holds (the shared list checks
	// Secrets only in llm and the controller's own namespace).
	env.CheckLeastPrivilege(t, ns, "switchyard-proxy", "switchyard-controller", "switchyard-routing")

	// The controller, as its ServiceAccount, with the overlay's flags.
	args := d.Spec.Template.Spec.Containers[0].Args
	opts := controller.Options{ProxyNamespace: ns, WatchNamespaces: watched, PollInterval: time.Second}
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--configmap-name="); ok {
			opts.ConfigMapName = v
		}
	}
	ctrl.SetLogger(logr.Discard())
	user, err := env.Env.AddUser(envtest.User{Name: controllerSA, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(user.Config(), ctrl.Options{
		Scheme:                 env.Scheme,
		Cache:                  controller.CacheOptions(opts),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// -count=N starts the controller N times in this process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := controller.Setup(ctx, mgr, opts); err != nil {
		cancel()
		t.Fatal(err)
	}
	var mgrErr error
	stopped := make(chan struct{})
	go func() { mgrErr = mgr.Start(ctx); close(stopped) }()
	t.Cleanup(func() {
		cancel()
		<-stopped
		if mgrErr != nil {
			t.Errorf("controller: %v", mgrErr)
		}
	})
	const key = "sk-namespaced-overlay-test"
	if out, errOut, err := env.Kubectl(strings.NewReader(`apiVersion: v1
kind: Secret
metadata: {name: team-key}
stringData: {apiKey: `+key+`}
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: namespaced-openai}
spec:
  provider: openai
  baseURL: https://api.openai.com/v1
  credentialsRef: {name: team-key, key: apiKey}
  models: [{name: gpt-4o}]
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: namespaced-chat}
spec:
  models: [gpt-4o]
  channels: [{name: namespaced-openai}]
`), "apply", "-n", watched[0], "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
	}
	creds := client.ObjectKey{Namespace: ns, Name: orDefault(opts.ConfigMapName, controller.DefaultConfigMapName) + "-credentials"}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var s corev1.Secret
		err := env.Client.Get(context.Background(), creds, &s)
		if err == nil && strings.Contains(string(s.Data[controller.CredentialsKey]), key) {
			break
		}
		select {
		case <-stopped:
			t.Fatalf("the controller stopped: %v", mgrErr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no key from %s in %s after 60s (last error: %v): the controller lacks a right it needs", watched[0], creds, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
