package routing_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/internal/routing"
	"github.com/switchyard-io/switchyard/internal/routing/routingtest"
)

func compile(t testing.TB, in routing.Inputs) *routing.Table {
	t.Helper()
	tbl, problems := routing.Compile(in)
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	return tbl
}

// TestEncodeTableForms: a small table stays plain indented JSON (what `kubectl get cm -o yaml`
// shows, and what every earlier controller wrote); the benchmarked scale is gzip in binaryData,
// well under the object limit. Both read back to the same table and hash.
func TestEncodeTableForms(t *testing.T) {
	for _, tc := range []struct {
		name       string
		teams      int
		compressed bool
	}{
		{"one team", 1, false},
		{"scale", routingtest.ScaleTeams, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl := compile(t, routingtest.Teams("llm", tc.teams))
			p, err := routing.EncodeTable(tbl)
			if err != nil {
				t.Fatal(err)
			}
			if p.Compressed() != tc.compressed || (p.Data == nil) == (p.BinaryData == nil) {
				t.Fatalf("compressed %v, data %d keys, binaryData %d keys", p.Compressed(), len(p.Data), len(p.BinaryData))
			}
			if p.Hash != tbl.Hash() {
				t.Errorf("hash %s, want %s", p.Hash, tbl.Hash())
			}
			if !tc.compressed {
				want, _ := json.MarshalIndent(tbl, "", "  ")
				if p.Data[routing.ConfigMapKey] != string(want) {
					t.Errorf("the plain form is not json.MarshalIndent of the table")
				}
			}
			if p.Size() > routing.MaxObjectBytes {
				t.Errorf("size %d over %d", p.Size(), routing.MaxObjectBytes)
			}
			t.Logf("%d channels, %d policies: %d bytes (compressed %v)", len(tbl.Channels), len(tbl.Policies), p.Size(), p.Compressed())
			back, err := routing.DecodeTable(p.Data, p.BinaryData)
			if err != nil {
				t.Fatal(err)
			}
			if back.Hash() != tbl.Hash() {
				t.Errorf("read back with hash %s, want %s", back.Hash(), tbl.Hash())
			}
			again, _ := routing.EncodeTable(tbl)
			if !again.Equal(p.Data, p.BinaryData) {
				t.Errorf("two encodings of one table differ: the controller would rewrite it on every sync")
			}
		})
	}
}

// TestDecodeTableRefuses: what the proxy must not apply.
func TestDecodeTableRefuses(t *testing.T) {
	tbl := compile(t, routingtest.Teams("llm", 1))
	plain, _ := json.Marshal(tbl)
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	_, _ = w.Write(plain)
	_ = w.Close()
	for _, tc := range []struct {
		name   string
		data   map[string]string
		binary map[string][]byte
		want   string
	}{
		{"no key", map[string]string{"other": "x"}, nil, "no table.json or table.json.gz key"},
		{"both keys", map[string]string{routing.ConfigMapKey: string(plain)}, map[string][]byte{routing.CompressedConfigMapKey: z.Bytes()}, "both"},
		{"not gzip", nil, map[string][]byte{routing.CompressedConfigMapKey: plain}, "not gzip"},
		{"truncated gzip", nil, map[string][]byte{routing.CompressedConfigMapKey: z.Bytes()[:z.Len()/2]}, "not valid gzip"},
		{"not JSON", map[string]string{routing.ConfigMapKey: "{not json"}, nil, "not a routing table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := routing.DecodeTable(tc.data, tc.binary)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// What earlier controllers wrote (indented; compact JSON is read the same) still reads.
	if back, err := routing.DecodeTable(map[string]string{routing.ConfigMapKey: string(plain)}, nil); err != nil || back.Hash() != tbl.Hash() {
		t.Errorf("compact table.json: %v", err)
	}
}

// TestEncodeTooLarge: a table or credentials that cannot fit in one object are an error, before
// anything is written, not a request the API server refuses halfway through a publication.
func TestEncodeTooLarge(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	random := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
		}
		return string(b)
	}
	tbl := &routing.Table{Policies: []routing.Policy{}}
	for i := range 2500 {
		// Random letters compress to about 60%: 2,500 × 1 KB is well over the limit compressed.
		tbl.Channels = append(tbl.Channels, routing.Channel{Name: fmt.Sprintf("c-%d", i), Provider: "openai",
			BaseURL: "https://" + random(1000) + ".example/v1"})
	}
	if _, err := routing.EncodeTable(tbl); !errors.Is(err, routing.ErrTooLarge) {
		t.Errorf("a %d-channel incompressible table: %v, want ErrTooLarge", len(tbl.Channels), err)
	}
	keys := map[string]routing.Secret{}
	for i := range 6000 {
		keys[fmt.Sprintf("ns/c-%d", i)] = routing.NewSecret(random(routingtest.ScaleKeyLength))
	}
	if _, err := routing.EncodeCredentials(keys); !errors.Is(err, routing.ErrTooLarge) {
		t.Errorf("%d keys: %v, want ErrTooLarge", len(keys), err)
	}
}

func TestCredentialsRoundTrip(t *testing.T) {
	keys := map[string]routing.Secret{"a": routing.NewSecret("sk-a"), "llm/b": routing.NewSecret("sk-b")}
	b, err := routing.EncodeCredentials(keys)
	if err != nil {
		t.Fatal(err)
	}
	back, err := routing.DecodeCredentials(b)
	if err != nil || len(back) != 2 || back["a"].Reveal() != "sk-a" || back["llm/b"].Reveal() != "sk-b" {
		t.Errorf("round trip: %v %v", back, err)
	}
	if _, err := routing.DecodeCredentials([]byte("[]")); err == nil {
		t.Error("a JSON array read as credentials")
	}
}

// BenchmarkScale is the controller's work for one publication at the benchmarked scale (1,000
// channels × 5 models, 1,000 policies): compile, render the ConfigMap's and the Secret's
// content, and the proxy's side, reading it back.
func BenchmarkScale(b *testing.B) {
	in := routingtest.ScaleInputs("llm")
	tbl := compile(b, in)
	b.Run("compile", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			routing.Compile(in)
		}
	})
	b.Run("render", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := routing.EncodeTable(tbl); err != nil {
				b.Fatal(err)
			}
			if _, err := routing.EncodeCredentials(tbl.Credentials); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("compile+render", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			t, _ := routing.Compile(in)
			if _, err := routing.EncodeTable(t); err != nil {
				b.Fatal(err)
			}
			if _, err := routing.EncodeCredentials(t.Credentials); err != nil {
				b.Fatal(err)
			}
		}
	})
	p, _ := routing.EncodeTable(tbl)
	creds, _ := routing.EncodeCredentials(tbl.Credentials)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := routing.DecodeTable(p.Data, p.BinaryData); err != nil {
				b.Fatal(err)
			}
			if _, err := routing.DecodeCredentials(creds); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestDecodeReadsTablesFromBeforeNamespacedChannels: a table an earlier controller wrote names a
// policy's candidates, and the credentials, by channel name alone; read now, both find the
// channel by its ID, so upgrading the proxies before the controller keeps serving.
func TestDecodeReadsTablesFromBeforeNamespacedChannels(t *testing.T) {
	legacy := `{"channels":[{"name":"openai","namespace":"llm","provider":"openai","baseURL":"https://x/v1","models":[{"name":"gpt-4o","upstream":"gpt-4o"}],"weight":100,"hasCredentials":true}],` +
		`"policies":[{"name":"chat","namespace":"llm","models":["gpt-4o"],"channels":[{"channel":"openai","weight":100}]}]}`
	tbl, err := routing.DecodeTable(map[string]string{routing.ConfigMapKey: legacy}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := tbl.Policies[0].Channels[0].Channel; got != "llm/openai" {
		t.Errorf("candidate %q, want llm/openai", got)
	}
	keys, err := routing.DecodeCredentials([]byte(`{"openai":"sk-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := routing.KeyFor(keys, &tbl.Channels[0]); !ok || k.Reveal() != "sk-1" {
		t.Errorf("key by name not found: %v", ok)
	}
}
