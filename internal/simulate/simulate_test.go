package simulate

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// short is a small world that runs in well under a second.
func short() Config {
	c := DefaultConfig()
	c.Duration = 3 * 24 * time.Hour
	c.UpMean = 3 * time.Hour
	return c
}

func TestSameSeedSameNumbers(t *testing.T) {
	a, err := Run(context.Background(), short())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(context.Background(), short())
	if err != nil {
		t.Fatal(err)
	}
	var ta, tb bytes.Buffer
	if err := WriteTable(&ta, short(), a); err != nil {
		t.Fatal(err)
	}
	if err := WriteTable(&tb, short(), b); err != nil {
		t.Fatal(err)
	}
	if ta.String() != tb.String() {
		t.Fatalf("same seed, different output:\n%s\n%s", ta.String(), tb.String())
	}
	other := short()
	other.Seed = 2
	c, err := Run(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	if c[0] == a[0] {
		t.Errorf("seed 2 gave the same single-channel result as seed 1: %+v", c[0])
	}
}

// TestChannelsShareOutages: channel 1 has the same outages whether it runs alone or with others,
// so the comparison between 1, 2 and 3 channels is about failover, not luck.
func TestChannelsShareOutages(t *testing.T) {
	cfg := short()
	if err := cfg.defaults(); err != nil {
		t.Fatal(err)
	}
	one := outagesOf(&cfg, 0)
	if len(one) == 0 {
		t.Fatal("no outages drawn")
	}
	again := outagesOf(&cfg, 0)
	if len(one) != len(again) || one[0] != again[0] {
		t.Fatal("channel 1's outages depend on the call")
	}
	if two := outagesOf(&cfg, 1); len(two) > 0 && two[0] == one[0] {
		t.Fatal("channels 1 and 2 share an outage: they must be independent")
	}
}

func TestMoreChannelsNeverWorse(t *testing.T) {
	res, err := Run(context.Background(), short())
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 {
		t.Fatalf("results %+v", res)
	}
	for i := 1; i < len(res); i++ {
		if res[i].AvailabilityPercent < res[i-1].AvailabilityPercent {
			t.Errorf("%d channels: %.4f%% < %d channels: %.4f%%", res[i].Channels, res[i].AvailabilityPercent,
				res[i-1].Channels, res[i-1].AvailabilityPercent)
		}
	}
	if res[0].FailedOver != 0 {
		t.Errorf("one channel cannot fail over, got %d", res[0].FailedOver)
	}
	if res[1].FailedOver == 0 || res[1].MoveP95 == 0 {
		t.Errorf("two channels never failed over: %+v", res[1])
	}
}

// TestHeadline runs the default month: one channel near 97%, two at about 99.8% or better. The
// numbers come out of the simulation; this only checks they land where the design notes say.
func TestHeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("a simulated month takes a few seconds")
	}
	start := time.Now()
	res, err := Run(context.Background(), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d results in %s", len(res), time.Since(start))
	if a := res[0].AvailabilityPercent; a < 96 || a > 98 {
		t.Errorf("one channel: %.3f%%, want near 97%%", a)
	}
	if a := res[1].AvailabilityPercent; a < 99.8 {
		t.Errorf("two channels: %.3f%%, want at least 99.8%%", a)
	}
	if res[2].AvailabilityPercent < res[1].AvailabilityPercent {
		t.Errorf("three channels worse than two: %+v", res)
	}
}

func TestCommand(t *testing.T) {
	args := []string{"--days", "2", "--up-mean", "4h", "--channels", "1,2", "--seed", "7"}
	var out1, out2, errb bytes.Buffer
	if err := Command(context.Background(), args, &out1, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if err := Command(context.Background(), args, &out2, &errb); err != nil {
		t.Fatal(err)
	}
	if out1.String() != out2.String() {
		t.Fatal("same flags, different output")
	}
	for _, want := range []string{"Simulated 2 days", "seed 7", "availability", "traffic moved"} {
		if !strings.Contains(out1.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out1.String())
		}
	}
	var js bytes.Buffer
	if err := Command(context.Background(), append(args, "--format", "json"), &js, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"availabilityPercent"`) {
		t.Errorf("json output:\n%s", js.String())
	}
	var half bytes.Buffer
	if err := Command(context.Background(), append(args, "--rollout-percent", "50"), &half, &errb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Rollout: 50% of the requests", "policy cohort", "listed cohort"} {
		if !strings.Contains(half.String(), want) {
			t.Errorf("--rollout-percent 50 output lacks %q:\n%s", want, half.String())
		}
	}
	if strings.Contains(out1.String(), "cohort") {
		t.Errorf("without a rollout the output mentions cohorts:\n%s", out1.String())
	}
	if err := Command(context.Background(), []string{"--rollout-percent", "0"}, &js, &errb); err == nil {
		t.Error("--rollout-percent 0 accepted")
	}
	if err := Command(context.Background(), []string{"--channels", "0"}, &js, &errb); err == nil {
		t.Error("--channels 0 accepted")
	}
	if err := Command(context.Background(), []string{"--format", "xml"}, &js, &errb); err == nil {
		t.Error("--format xml accepted")
	}
}

// TestRolloutSplitsCohorts: with spec.rollout.percent 30 the proxy's cohort choice (a hash of
// the request id) puts 30% of the requests in the policy's cohort, and the rest walk the
// channels in order: during channel 1's outages those keep trying it first and fail over, so
// many more requests are failed over than when the policy steers them all.
func TestRolloutSplitsCohorts(t *testing.T) {
	all := short()
	all.Channels = []int{2}
	split := all
	split.RolloutPercent = 30
	res, err := Run(context.Background(), split)
	if err != nil {
		t.Fatal(err)
	}
	base, err := Run(context.Background(), all)
	if err != nil {
		t.Fatal(err)
	}
	r, b := res[0], base[0]
	c := r.Cohorts
	if c == nil || b.Cohorts != nil {
		t.Fatalf("cohorts: %+v at 30%%, %+v at 100%%", c, b.Cohorts)
	}
	if c.Policy.Requests+c.Listed.Requests != r.Requests || c.Policy.Failed+c.Listed.Failed != r.Failed {
		t.Fatalf("the cohorts do not add up: %+v, %+v", c, r)
	}
	// About 260,000 requests: one percentage point is more than ten standard deviations.
	if share := float64(c.Policy.Requests) * 100 / float64(r.Requests); share < 29 || share > 31 {
		t.Errorf("policy cohort: %d of %d requests (%.2f%%), want 30%% ± 1", c.Policy.Requests, r.Requests, share)
	}
	t.Logf("30%%: %+v; failed over %d; at 100%%: failed over %d", *c, r.FailedOver, b.FailedOver)
	if r.FailedOver < 3*b.FailedOver {
		t.Errorf("failed over: %d at 30%%, %d at 100%%: the listed cohort does not walk the channels in order", r.FailedOver, b.FailedOver)
	}
	for _, bad := range []int{-1, 101} {
		cfg := short()
		cfg.RolloutPercent = bad
		if _, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("rollout percent %d accepted", bad)
		}
	}
}
