package routing

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
)

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"gpt-4o*", "gpt-4o", true},
		{"gpt-4o*", "gpt-4o-mini", true},
		{"gpt-4o*", "gpt-4", false},
		{"claude-sonnet-*", "claude-sonnet-4-5", true},
		{"*", "meta/llama-3", true},
		{"meta/*", "meta/llama-3", true},
		{"gpt-?o", "gpt-4o", true},
		{"gpt-?o", "gpt-40o", false},
		{"*-mini", "gpt-4o-mini", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"exact", "exact", true},
		{"exact", "exactly", false},
	} {
		if got := Glob(tc.pattern, tc.name); got != tc.want {
			t.Errorf("Glob(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

func gatewayClient(ns, name, secret string, models ...string) v1alpha1.GatewayClient {
	return v1alpha1.GatewayClient{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 2},
		Spec: v1alpha1.GatewayClientSpec{KeysSecretRef: v1alpha1.LocalSecretRef{Name: secret}, Models: models}}
}

func keysSecret(ns, name string, keys ...string) corev1.Secret {
	s := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for i, k := range keys {
		s.Data[string(rune('a'+i))] = []byte(k)
	}
	return s
}

func TestCompileClientsHashesKeysOnly(t *testing.T) {
	in := Inputs{
		Clients: []v1alpha1.GatewayClient{gatewayClient("team", "search", "search-keys", "gpt-4o*")},
		Secrets: []corev1.Secret{keysSecret("team", "search-keys", "sk-client-one-4f8a2c9e1b7d3a6f0e5c", "sk-client-two-9b3e7d1f5a2c8e4b6d0a\n", "")},
	}
	clients, problems := CompileClients(in)
	if len(problems) != 0 || len(clients) != 1 {
		t.Fatalf("clients %v problems %v", clients, problems)
	}
	c := clients[0]
	if len(c.KeyHashes) != 2 || !strings.Contains(strings.Join(c.KeyHashes, ","), KeyHash("sk-client-two-9b3e7d1f5a2c8e4b6d0a")) {
		t.Fatalf("key hashes %v: want the hashes of both keys (trailing newline dropped), the empty value skipped", c.KeyHashes)
	}
	tbl := &Table{Clients: clients}
	b, _ := json.Marshal(tbl)
	if strings.Contains(string(b), "sk-client") {
		t.Fatalf("the table carries a key: %s", b)
	}
	if g := tbl.Generations()["GatewayClient/team/search"]; g != 2 {
		t.Fatalf("generation %d, want 2", g)
	}
	if !c.Allows("gpt-4o-mini") || c.Allows("claude-3") {
		t.Fatal("model globs not applied")
	}
}

// Keys of the compile tests: long and random enough to pass keyWeakness.
const (
	testKey1 = "sk-test-1-8d4f2a9c6e1b7d3f5a0c2e8b"
	testKey2 = "sk-test-2-1c7e5b3f9a2d8e6c4b0f1a7d"
)

func TestCompileClientsProblems(t *testing.T) {
	in := Inputs{
		Clients: []v1alpha1.GatewayClient{
			gatewayClient("team", "a", "a-keys"),
			gatewayClient("team", "b", "b-keys"), // shares a key with a
			gatewayClient("team", "c", "missing"),
			gatewayClient("team", "d", "empty"),
			gatewayClient("switchyard-system", "e", "switchyard-credentials"),
		},
		Secrets: []corev1.Secret{
			keysSecret("team", "a-keys", testKey1), keysSecret("team", "b-keys", testKey2, testKey1), keysSecret("team", "empty"),
			keysSecret("switchyard-system", "switchyard-credentials", testKey2),
		},
		ReservedSecrets: map[string]bool{"switchyard-system/switchyard-credentials": true},
	}
	clients, problems := CompileClients(in)
	if len(clients) != 1 || clients[0].Name != "a" {
		t.Fatalf("clients %v: want only a", clients)
	}
	want := map[string]string{"b": ReasonKeyConflict, "c": ReasonSecretNotFound, "d": ReasonSecretKeyNotFound, "e": ReasonRefNotPermitted}
	if len(problems) != len(want) {
		t.Fatalf("problems %v", problems)
	}
	for _, p := range problems {
		if want[p.Name] != p.Reason || !strings.Contains(p.Message, "spec.keysSecretRef") {
			t.Errorf("problem %v: want reason %s naming spec.keysSecretRef", p, want[p.Name])
		}
	}
}

// A proxy that predates clients decodes a table with a clients section and ignores it.
func TestDecodeTableOldReaderIgnoresClients(t *testing.T) {
	tbl := &Table{Clients: []Client{{Name: "a", KeyHashes: []string{KeyHash("k")}}}, ProxyReplicas: 2}
	pub, err := EncodeTable(tbl)
	if err != nil {
		t.Fatal(err)
	}
	var old struct {
		Channels []Channel `json:"channels"`
		Policies []Policy  `json:"policies"`
	}
	dec := json.NewDecoder(strings.NewReader(pub.Data[ConfigMapKey]))
	if err := dec.Decode(&old); err != nil {
		t.Fatalf("an old reader refuses the table: %v", err)
	}
	got, err := DecodeTable(pub.Data, pub.BinaryData)
	if err != nil || len(got.Clients) != 1 || got.ProxyReplicas != 2 {
		t.Fatalf("round trip: %v %+v", err, got)
	}
}

// A key under 32 characters, the samples' placeholder, or a long run of few characters is refused
// at compile: the client is left out (its callers get 401) with reason WeakKey naming the key's
// entry and keyId, never its value. A client whose keys are all strong compiles beside it.
func TestCompileClientsRefusesWeakKeys(t *testing.T) {
	for _, tc := range []struct {
		name, key, why string
	}{
		{"one character", "k", "shorter than 32"},
		{"31 characters", "sk-0123456789abcdef0123456789ab", "shorter than 32"},
		{"the samples' placeholder", "sk-sy-replace-me-with-a-random-key-0000000000", "placeholder"},
		{"few distinct characters", "sk-abababababababababababababababab", "distinct"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Inputs{
				Clients: []v1alpha1.GatewayClient{gatewayClient("team", "weak", "weak-keys", "*"), gatewayClient("team", "strong", "strong-keys", "*")},
				Secrets: []corev1.Secret{keysSecret("team", "weak-keys", testKey1, tc.key), keysSecret("team", "strong-keys", testKey2)},
			}
			clients, problems := CompileClients(in)
			if len(clients) != 1 || clients[0].Name != "strong" {
				t.Fatalf("clients %v: want only strong", clients)
			}
			if len(problems) != 1 || problems[0].Name != "weak" || problems[0].Reason != ReasonWeakKey {
				t.Fatalf("problems %v: want one WeakKey on weak", problems)
			}
			msg := problems[0].Message
			for _, want := range []string{"spec.keysSecretRef", `key "b"`, "keyId " + KeyID(tc.key), tc.why} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
			if (len(tc.key) > 1 && strings.Contains(msg, tc.key)) || strings.Contains(msg, testKey1) {
				t.Errorf("message %q carries a key", msg)
			}
		})
	}
	if len("sk-0123456789abcdef0123456789ab") != MinKeyLength-1 {
		t.Fatal("the 31-character case is not 31 characters")
	}
}

// spec.limits.maxInFlight reaches the table as Limits.MaxInFlight.
func TestCompileClientsMaxInFlight(t *testing.T) {
	gc := gatewayClient("team", "search", "search-keys", "*")
	five := int32(5)
	gc.Spec.Limits = &v1alpha1.ClientLimits{MaxInFlight: &five}
	clients, problems := CompileClients(Inputs{Clients: []v1alpha1.GatewayClient{gc}, Secrets: []corev1.Secret{keysSecret("team", "search-keys", testKey1)}})
	if len(problems) != 0 || len(clients) != 1 || clients[0].Limits.MaxInFlight != 5 {
		t.Fatalf("clients %+v problems %v: want maxInFlight 5", clients, problems)
	}
}
