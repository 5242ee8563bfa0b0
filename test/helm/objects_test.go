package helm

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// object is one rendered manifest.
type object struct {
	Kind, Name, Namespace string
	Raw                   []byte
}

// objects is a rendered chart, in render order.
type objects []object

func parse(t *testing.T, manifests string) objects {
	t.Helper()
	var objs objects
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifests)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading the rendered manifests: %v", err)
		}
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("rendered manifest is not YAML: %v\n%s", err, doc)
		}
		if meta.Kind == "" {
			continue // comments only
		}
		objs = append(objs, object{Kind: meta.Kind, Name: meta.Metadata.Name, Namespace: meta.Metadata.Namespace, Raw: doc})
	}
	return objs
}

// ofKind returns the objects of one kind.
func (o objects) ofKind(kind string) objects {
	var out objects
	for _, x := range o {
		if x.Kind == kind {
			out = append(out, x)
		}
	}
	return out
}

// get decodes the one object of kind and name into v; it fails the test when there is none.
func (o objects) get(t *testing.T, kind, name string, v any) {
	t.Helper()
	for _, x := range o {
		if x.Kind == kind && x.Name == name {
			if err := yaml.Unmarshal(x.Raw, v); err != nil {
				t.Fatalf("%s/%s: %v", kind, name, err)
			}
			return
		}
	}
	t.Fatalf("no %s/%s among the rendered objects: %v", kind, name, o.names())
}

func (o objects) has(kind, name string) bool {
	for _, x := range o {
		if x.Kind == kind && x.Name == name {
			return true
		}
	}
	return false
}

func (o objects) names() []string {
	var out []string
	for _, x := range o {
		out = append(out, x.Kind+"/"+x.Name)
	}
	return out
}

// without returns the manifests as one YAML stream, leaving out the given kinds.
func (o objects) yaml(skipKinds ...string) string {
	var b strings.Builder
	for _, x := range o {
		skip := false
		for _, k := range skipKinds {
			skip = skip || x.Kind == k
		}
		if skip {
			continue
		}
		b.WriteString("---\n")
		b.Write(x.Raw)
		b.WriteString("\n")
	}
	return b.String()
}
