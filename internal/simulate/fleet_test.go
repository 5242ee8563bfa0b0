package simulate

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestFleetSharedBeatsLocal: 20 replicas at 1 request/s in all see 0.05 requests/s each. Judging
// alone, each learns every outage by itself; sharing, the fleet learns it once: traffic moves
// sooner, fewer attempts fail on the broken channel, and one replica probes for all.
func TestFleetSharedBeatsLocal(t *testing.T) {
	cfg := short()
	cfg.Duration = 36 * time.Hour
	cfg.Channels = []int{2}
	cfg.Replicas = 20
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Fleet == nil || res[0].Fleet.Mode != FleetLocal || res[1].Fleet.Mode != FleetShared {
		t.Fatalf("results %+v, want local then shared", res)
	}
	local, shared := res[0].Fleet, res[1].Fleet
	t.Logf("local %+v\nshared %+v", *local, *shared)
	if shared.MoveP50 >= local.MoveP50 || shared.MoveP90 >= local.MoveP90 {
		t.Errorf("traffic moved p50/p90: shared %s/%s, local %s/%s; want shared sooner", shared.MoveP50, shared.MoveP90, local.MoveP50, local.MoveP90)
	}
	if shared.BrokenAttempts >= local.BrokenAttempts {
		t.Errorf("failed attempts on broken channels: shared %d, local %d", shared.BrokenAttempts, local.BrokenAttempts)
	}
	if shared.Probes*3 >= local.Probes {
		t.Errorf("probes: shared %d, local %d; want a fraction", shared.Probes, local.Probes)
	}
	if res[0].Requests != res[1].Requests && absDiff(res[0].Requests, res[1].Requests) > res[0].Requests/100 {
		t.Errorf("requests %d vs %d: the modes should see about the same traffic", res[0].Requests, res[1].Requests)
	}
	var a, b bytes.Buffer
	if err := WriteTable(&a, cfg, res); err != nil {
		t.Fatal(err)
	}
	again, _ := Run(context.Background(), cfg)
	if err := WriteTable(&b, cfg, again); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Fatalf("same seed, different fleet output:\n%s\n%s", a.String(), b.String())
	}
	if !strings.Contains(a.String(), "Fleet: 20 replicas") || !strings.Contains(a.String(), "shared") {
		t.Errorf("table:\n%s", a.String())
	}
}

func absDiff(a, b int) int {
	if a > b {
		return a - b
	}
	return b - a
}

// TestFleetFlags: --replicas, --fleet (one mode or both) and --fleet-sync-interval.
func TestFleetFlags(t *testing.T) {
	var out, errb bytes.Buffer
	err := Command(context.Background(), []string{"--replicas", "3", "--fleet", "shared", "--fleet-sync-interval", "2s",
		"--channels", "2", "--days", "1", "--up-mean", "3h"}, &out, &errb)
	if err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if s := out.String(); !strings.Contains(s, "every 2s") || strings.Contains(s, " local ") || !strings.Contains(s, " shared ") {
		t.Errorf("output:\n%s", s)
	}
	for _, bad := range [][]string{{"--fleet", "both"}, {"--replicas", "0"}, {"--replicas", "2", "--fleet-sync-interval", "1ms"}} {
		if err := Command(context.Background(), append(bad, "--days", "1"), &out, &errb); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
