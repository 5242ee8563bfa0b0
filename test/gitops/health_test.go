// Package gitops checks the GitOps health checks the README and the chart's README give: the Argo
// CD Lua (run here with gopher-lua, the interpreter Argo CD embeds) maps the objects' Accepted,
// Programmed and Ready conditions to Healthy, Progressing and Degraded, and the Flux snippet is a
// valid Kustomization.
package gitops

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/yaml"
)

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// block returns the first YAML code block of a README that contains marker.
func block(t *testing.T, readme, marker string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", readme))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range yamlBlock.FindAllStringSubmatch(string(b), -1) {
		if strings.Contains(m[1], marker) {
			return m[1]
		}
	}
	t.Fatalf("%s has no YAML block with %q", readme, marker)
	return ""
}

const argoKey = "resource.customizations.health.switchyard.io_ProviderChannel"

func argoScripts(t *testing.T) (channel, policy string) {
	t.Helper()
	doc := block(t, "README.md", argoKey)
	if chart := block(t, filepath.Join("charts", "switchyard", "README.md"), argoKey); chart != doc {
		t.Fatalf("the chart's README and the README give different Argo CD health checks")
	}
	var cm struct{ Data map[string]string }
	if err := yaml.Unmarshal([]byte(doc), &cm); err != nil {
		t.Fatalf("the Argo CD snippet is not YAML: %v", err)
	}
	return cm.Data[argoKey], cm.Data["resource.customizations.health.switchyard.io_RoutingPolicy"]
}

// health runs an Argo CD health script with obj set, as Argo CD does, and returns hs.
func health(t *testing.T, script string, obj map[string]any) (status, message string) {
	t.Helper()
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", toLua(L, obj))
	fn, err := L.LoadString(script)
	if err != nil {
		t.Fatalf("the health check does not parse: %v", err)
	}
	L.Push(fn)
	if err := L.PCall(0, 1, nil); err != nil {
		t.Fatalf("the health check fails: %v", err)
	}
	hs, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("the health check returns %s, not a table", L.Get(-1).Type())
	}
	return hs.RawGetString("status").String(), hs.RawGetString("message").String()
}

func toLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range x {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range x {
			t.Append(toLua(L, e))
		}
		return t
	case string:
		return lua.LString(x)
	case int:
		return lua.LNumber(x)
	case bool:
		return lua.LBool(x)
	}
	return lua.LNil
}

func object(generation int, conds ...map[string]any) map[string]any {
	list := make([]any, len(conds))
	for i, c := range conds {
		list[i] = c
	}
	o := map[string]any{"metadata": map[string]any{"name": "chat", "generation": generation}}
	if conds != nil {
		o["status"] = map[string]any{"conditions": list}
	}
	return o
}

func cond(typ, status, reason, msg string, gen int) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg, "observedGeneration": gen}
}

func TestArgoCDHealth(t *testing.T) {
	channel, policy := argoScripts(t)
	if channel == "" || channel != policy {
		t.Fatalf("the two kinds need the same, non-empty check")
	}
	cases := []struct {
		name       string
		obj        map[string]any
		want, says string
	}{
		{"no status yet", object(1), "Progressing", "controller"},
		{"ready", object(2, cond("Accepted", "True", "Accepted", "ok", 2), cond("Programmed", "True", "Programmed", "served", 2),
			cond("Ready", "True", "Ready", "accepted and served", 2)), "Healthy", "accepted and served"},
		{"the controller has not seen this generation", object(3, cond("Ready", "True", "Ready", "old", 2)), "Progressing", "controller"},
		{"not served yet", object(2, cond("Accepted", "True", "Accepted", "ok", 2), cond("Programmed", "False", "Pending", "not served yet by p1", 2),
			cond("Ready", "False", "Pending", "not served yet by p1", 2)), "Progressing", "p1"},
		{"a problem", object(2, cond("Accepted", "False", "SecretNotFound", "Secret llm/k not found", 2),
			cond("Programmed", "False", "Stale", "serves generation 1", 2), cond("Ready", "False", "SecretNotFound", "Secret llm/k not found", 2)),
			"Degraded", "Secret llm/k not found"},
		{"no proxies", object(2, cond("Accepted", "True", "Accepted", "ok", 2), cond("Programmed", "False", "NoProxies", "no proxy replica reports", 2),
			cond("Ready", "False", "NoProxies", "no proxy replica reports", 2)), "Degraded", "no proxy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, msg := health(t, channel, tc.obj)
			if status != tc.want || !strings.Contains(msg, tc.says) {
				t.Errorf("health %s (%q), want %s mentioning %q", status, msg, tc.want, tc.says)
			}
		})
	}
}

func TestFluxSnippet(t *testing.T) {
	var ks struct {
		APIVersion string `json:"apiVersion"`
		Kind       string
		Spec       struct {
			HealthChecks []struct {
				APIVersion string `json:"apiVersion"`
				Kind       string
				Name       string
				Namespace  string
			} `json:"healthChecks"`
		}
	}
	if err := yaml.Unmarshal([]byte(block(t, "README.md", "kind: Kustomization")), &ks); err != nil {
		t.Fatal(err)
	}
	if ks.APIVersion != "kustomize.toolkit.fluxcd.io/v1" || ks.Kind != "Kustomization" || len(ks.Spec.HealthChecks) == 0 {
		t.Fatalf("%+v", ks)
	}
	for _, hc := range ks.Spec.HealthChecks {
		if hc.APIVersion != "switchyard.io/v1alpha1" || (hc.Kind != "RoutingPolicy" && hc.Kind != "ProviderChannel") || hc.Name == "" || hc.Namespace == "" {
			t.Errorf("health check %+v", hc)
		}
	}
}
