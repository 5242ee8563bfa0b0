package routing

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
)

func piiInputs(spec *v1alpha1.PII) Inputs {
	return Inputs{
		Channels: []v1alpha1.ProviderChannel{{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "llm"}, Spec: v1alpha1.ProviderChannelSpec{
			Provider: v1alpha1.ProviderOpenAI, BaseURL: "https://api.example.com/v1", Models: []v1alpha1.ChannelModel{{Name: "gpt-4o"}},
		}}},
		Policies: []v1alpha1.RoutingPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "llm"}, Spec: v1alpha1.RoutingPolicySpec{
			Models: []string{"gpt-4o"}, Channels: []v1alpha1.ChannelRef{{Name: "a"}}, PII: spec,
		}}},
	}
}

// TestCompilePII: spec.pii reaches the table as the proxy needs it (nil when off, restore on
// unless turned off), and a detector that cannot run is a problem on the policy naming its field.
func TestCompilePII(t *testing.T) {
	no := false
	ok := []struct {
		name string
		spec *v1alpha1.PII
		want *PII
	}{
		{"absent", nil, nil},
		{"off", &v1alpha1.PII{Mode: v1alpha1.PIIOff, CustomDetectors: []v1alpha1.PIICustomDetector{{Name: "t", Pattern: `T-\d+`}}}, nil},
		{"mode unset (standalone, no API server defaults)", &v1alpha1.PII{}, nil},
		{"mask: restore defaults to true", &v1alpha1.PII{Mode: v1alpha1.PIIMask}, &PII{Mode: "Mask", Restore: true}},
		{"block with detectors and a custom one", &v1alpha1.PII{Mode: v1alpha1.PIIBlock, Restore: &no,
			Detectors:       []v1alpha1.PIIDetector{"email", "kz-iin"},
			CustomDetectors: []v1alpha1.PIICustomDetector{{Name: "employee-id", Pattern: `EMP-[0-9]{6}`}}},
			&PII{Mode: "Block", Detectors: []string{"email", "kz-iin"}, Custom: []CustomDetector{{Name: "employee-id", Pattern: `EMP-[0-9]{6}`}}}},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			tbl, problems := Compile(piiInputs(c.spec))
			if len(problems) > 0 {
				t.Fatalf("problems: %v", problems)
			}
			if got := tbl.Policies[0].PII; !reflect.DeepEqual(got, c.want) {
				t.Errorf("PII = %+v, want %+v", got, c.want)
			}
		})
	}

	bad := []struct {
		name   string
		spec   *v1alpha1.PII
		wantIn string
	}{
		{"invalid custom regexp", &v1alpha1.PII{Mode: v1alpha1.PIIMask, CustomDetectors: []v1alpha1.PIICustomDetector{{Name: "ok", Pattern: "x"}, {Name: "broken", Pattern: "EMP-([0-9]"}}},
			"spec.pii.customDetectors[1].pattern"},
		{"invalid regexp with masking off", &v1alpha1.PII{Mode: v1alpha1.PIIOff, CustomDetectors: []v1alpha1.PIICustomDetector{{Name: "broken", Pattern: "a**"}}},
			"spec.pii.customDetectors[0].pattern"},
		{"unknown detector", &v1alpha1.PII{Mode: v1alpha1.PIIMask, Detectors: []v1alpha1.PIIDetector{"email", "passport"}}, "spec.pii.detectors"},
		{"unknown mode", &v1alpha1.PII{Mode: "Redact"}, "spec.pii.mode"},
		{"custom name a builtin's", &v1alpha1.PII{Mode: v1alpha1.PIIMask, CustomDetectors: []v1alpha1.PIICustomDetector{{Name: "email", Pattern: "x"}}}, "spec.pii.customDetectors[0].name"},
		{"custom name upper-case", &v1alpha1.PII{Mode: v1alpha1.PIIMask, CustomDetectors: []v1alpha1.PIICustomDetector{{Name: "Emp", Pattern: "x"}}}, "spec.pii.customDetectors[0].name"},
		{"custom name twice", &v1alpha1.PII{Mode: v1alpha1.PIIMask, CustomDetectors: []v1alpha1.PIICustomDetector{{Name: "a", Pattern: "x"}, {Name: "a", Pattern: "y"}}}, "spec.pii.customDetectors[1].name"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			tbl, problems := Compile(piiInputs(c.spec))
			if len(problems) != 1 || problems[0].Reason != ReasonInvalidSpec || problems[0].Kind != "RoutingPolicy" || !strings.Contains(problems[0].Message, c.wantIn) {
				t.Fatalf("problems = %v, want one InvalidSpec on the policy naming %s", problems, c.wantIn)
			}
			if len(tbl.Policies) != 0 {
				t.Error("the policy was compiled anyway")
			}
		})
	}
}

// TestCompilePIIFromManifest: the same through a standalone manifest, where nothing but the
// compiler stands between a typo and the proxy. Unquoted Off is YAML's false and is refused.
func TestCompilePIIFromManifest(t *testing.T) {
	doc := func(pii string) []ManifestFile {
		return []ManifestFile{{Path: "gw.yaml", Data: []byte(`apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: a}
spec: {provider: openai, baseURL: "https://api.example.com/v1", models: [{name: gpt-4o}]}
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: p}
spec:
  models: [gpt-4o]
  channels: [{name: a}]
  pii: ` + pii + "\n")}}
	}
	in, err := ParseManifests(doc(`{mode: Mask, detectors: [email], customDetectors: [{name: ticket, pattern: 'T-\d+'}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tbl, problems := Compile(in)
	want := &PII{Mode: "Mask", Restore: true, Detectors: []string{"email"}, Custom: []CustomDetector{{Name: "ticket", Pattern: `T-\d+`}}}
	if len(problems) > 0 || !reflect.DeepEqual(tbl.Policies[0].PII, want) {
		t.Errorf("PII = %+v (problems %v), want %+v", tbl.Policies[0].PII, problems, want)
	}
	in, err = ParseManifests(doc(`{mode: Off}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, problems := Compile(in); len(problems) != 1 || !strings.Contains(problems[0].Message, `spec.pii.mode`) || !strings.Contains(problems[0].Message, `"Off"`) {
		t.Errorf("unquoted Off: problems = %v, want one naming spec.pii.mode and the quoted spelling", problems)
	}
}
