package main

import (
	"strings"
	"testing"
	"time"
)

func TestFleetFlags(t *testing.T) {
	if f, err := fleetOptions("", "", "r", time.Second, false); f != nil || err != nil {
		t.Fatalf("without --fleet-redis: %v, %v", f, err)
	}
	t.Setenv("SWITCHYARD_FLEET_REDIS_PASSWORD", "envsecret")
	f, err := fleetOptions("redis://127.0.0.1:1/0", "", "r", time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "standalone" || strings.Contains(f.Endpoint, "envsecret") || !strings.Contains(f.Endpoint, "REDACTED") {
		t.Errorf("fleet %q, endpoint %q", f.Name, f.Endpoint)
	}
	for _, bad := range []struct{ url, name string }{{"http://h", ""}, {"redis://h", "a b"}, {"redis://:pw@h", "x;y"}} {
		if _, err := fleetOptions(bad.url, bad.name, "r", time.Second, false); err == nil || strings.Contains(err.Error(), "pw@") {
			t.Errorf("fleetOptions(%q, %q): %v", bad.url, bad.name, err)
		}
	}
	if _, err := fleetOptions("redis://h", "", "r", time.Hour, false); err == nil {
		t.Error("an hour's sync interval was taken")
	}
	for _, tc := range []struct {
		cluster       bool
		ns, pod, want string
	}{
		{true, "llm", "switchyard-proxy-7d9f8c6b5-x2x9k", "llm/switchyard-proxy"},
		{true, "llm", "bare", "standalone"},
		{false, "llm", "switchyard-proxy-7d9f8c6b5-x2x9k", "standalone"},
		{true, "", "a-b-c", "standalone"},
	} {
		if got := defaultFleetName(tc.cluster, tc.ns, tc.pod); got != tc.want {
			t.Errorf("defaultFleetName(%v, %q, %q) = %q, want %q", tc.cluster, tc.ns, tc.pod, got, tc.want)
		}
	}
}
