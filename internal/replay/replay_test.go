package replay

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/routing"
	"github.com/switchyard-io/switchyard/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the golden files (and the generated logs) in testdata/")

type scenario struct {
	name      string
	policy    string
	log       func() []byte
	incidents string
}

var scenarios = []scenario{
	{name: "bank", policy: bankPolicy, log: bankLog},
	{name: "noisy-burst", policy: chatPolicy, log: noisyLog},
	{name: "noise-spread", policy: chatPolicy, log: noiseSpreadLog},
	{name: "noise-in-a-row", policy: chatPolicy, log: noiseInARowLog},
	{name: "rate-limit-storm", policy: chatPolicy, log: rateLimitLog},
	{name: "recovery-ramp", policy: chatPolicy, log: recoveryLog},
	{name: "incidents", policy: chatPolicy, log: incidentLog, incidents: incidentFile},
	{name: "malformed", policy: chatPolicy, log: malformedLog},
}

// runScenario writes (with -update) or checks the scenario's inputs in testdata/NAME and replays
// them from those files.
func runScenario(t *testing.T, sc scenario) *Report {
	t.Helper()
	testutil.Golden(t, *update, filepath.Join(sc.name, "policy.yaml"), []byte(sc.policy))
	testutil.Golden(t, *update, filepath.Join(sc.name, "log.jsonl"), sc.log())
	if sc.incidents != "" {
		testutil.Golden(t, *update, filepath.Join(sc.name, "incidents.jsonl"), []byte(sc.incidents))
	}
	setup, err := LoadSetup(filepath.Join("testdata", sc.name, "policy.yaml"), "")
	if err != nil {
		t.Fatal(err)
	}
	var opts Options
	if sc.incidents != "" {
		f, err := os.Open(filepath.Join("testdata", sc.name, "incidents.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if opts.Incidents, err = ParseIncidents(f); err != nil {
			t.Fatal(err)
		}
	}
	log, err := OpenLog(filepath.Join("testdata", sc.name, "log.jsonl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	rep, err := Run(context.Background(), setup, log, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestReplayGolden(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			rep := runScenario(t, sc)
			var js, tbl bytes.Buffer
			if err := rep.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			if err := rep.WriteTable(&tbl); err != nil {
				t.Fatal(err)
			}
			testutil.Golden(t, *update, filepath.Join(sc.name, "report.json"), js.Bytes())
			testutil.Golden(t, *update, filepath.Join(sc.name, "report.txt"), tbl.Bytes())
		})
	}
}

func channelReport(t *testing.T, rep *Report, channel string) ChannelReport {
	t.Helper()
	for _, c := range rep.Channels {
		if c.Channel == channel {
			return c
		}
	}
	t.Fatalf("no report for %s", channel)
	return ChannelReport{}
}

func scenarioNamed(name string) scenario {
	for _, sc := range scenarios {
		if sc.name == name {
			return sc
		}
	}
	panic(name)
}

// The stories the golden files tell, asserted directly so that an -update cannot bless a
// regression.
func TestScenarioStories(t *testing.T) {
	t.Run("bank ejects at 10:02 with 52/240", func(t *testing.T) {
		c := channelReport(t, runScenario(t, scenarioNamed("bank")), "primary")
		var ej []EventReport
		for _, e := range c.Events {
			if e.To == "Ejected" {
				ej = append(ej, e)
			}
		}
		if len(ej) != 1 || ej[0].At != "2026-11-30T10:02:00Z" || ej[0].Reason != "ErrorRateExceeded" ||
			ej[0].Message != "error rate 21.7% (52/240) >= 18% over 2m0s" {
			t.Fatalf("ejections %+v", ej)
		}
	})
	for _, name := range []string{"noisy-burst", "noise-spread", "noise-in-a-row", "rate-limit-storm"} {
		t.Run(name+" does not eject", func(t *testing.T) {
			rep := runScenario(t, scenarioNamed(name))
			for _, c := range rep.Channels {
				if c.Ejections != 0 {
					t.Errorf("%s ejected: %+v", c.Channel, c.Events)
				}
			}
			if name == "rate-limit-storm" {
				c := channelReport(t, rep, "openai-direct")
				if len(c.Events) == 0 || c.Events[0].To != "RateLimited" {
					t.Errorf("no RateLimited phase: %+v", c.Events)
				}
			}
		})
	}
	// The same two noise logs under the old chat default: the timeout-rate rule alone ejected,
	// at the 20th request with 2 timeouts of 20.
	oldChat := strings.Replace(chatPolicy, "  scenario: chat\n", "  scenario: chat\n  detection:\n    timeoutRatePercent: 10\n", 1)
	for _, name := range []string{"noise-spread", "noise-in-a-row"} {
		t.Run(name+" ejects under the old default timeoutRatePercent 10", func(t *testing.T) {
			runScenario(t, scenarioNamed(name)) // the log in testdata is the builder's
			setup, err := NewSetup(mustPolicies(t, oldChat), nil)
			if err != nil {
				t.Fatal(err)
			}
			log, err := OpenLog(filepath.Join("testdata", name, "log.jsonl"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer log.Close()
			rep, err := Run(context.Background(), setup, log, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if s := rep.Models[0].Settings; s.TimeoutRatePercent != 10 {
				t.Fatalf("settings %+v, want timeoutRatePercent 10", s)
			}
			c := channelReport(t, rep, "openai-direct")
			var ej []EventReport
			for _, e := range c.Events {
				if e.To == "Ejected" {
					ej = append(ej, e)
				}
			}
			if len(ej) != 1 || ej[0].At != "2026-11-30T10:00:09.5Z" || ej[0].Reason != "TimeoutRateExceeded" ||
				ej[0].Message != "timeout rate 10.0% (2/20) >= 10% over 1m0s" {
				t.Fatalf("ejections %+v", ej)
			}
		})
	}
	t.Run("recovery goes through probes and every ramp step", func(t *testing.T) {
		c := channelReport(t, runScenario(t, scenarioNamed("recovery-ramp")), "openai-direct")
		var got []string
		for _, e := range c.Events {
			got = append(got, e.Reason)
		}
		want := []string{"ConsecutiveFailures", "CooldownElapsed", "ProbesPassed", "RampStep", "RampStep", "RampStep", "RampCompleted"}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("events %v, want %v", got, want)
		}
		if c.Probes.Answered != 3 || c.Probes.Unanswered != 0 {
			t.Errorf("probes %+v", c.Probes)
		}
		for _, p := range c.Phases {
			switch p.Phase {
			case "Ejected":
				if p.CarriedAttempts != 0 {
					t.Errorf("an ejected channel carried %d attempts", p.CarriedAttempts)
				}
			case "RampingUp":
				// 5%, 15%, 50% and 100% of 180 attempts each: 9 + 27 + 90 + 180 = 306, give or take the
				// step boundaries.
				if p.CarriedAttempts < 295 || p.CarriedAttempts > 315 {
					t.Errorf("the ramp carried %d of %d attempts", p.CarriedAttempts, p.LoggedAttempts)
				}
			}
		}
	})
	t.Run("incidents are scored", func(t *testing.T) {
		ir := runScenario(t, scenarioNamed("incidents")).Incidents
		if ir.Total != 3 || ir.Detected != 1 || ir.Missed != 2 || ir.FalseEjections != 1 || len(ir.Unknown) != 1 {
			t.Fatalf("%+v", ir)
		}
		if ir.Items[0].DelaySeconds != 4 || ir.False[0].At != "2026-11-30T10:45:04Z" {
			t.Errorf("delay %v, false ejection at %s", ir.Items[0].DelaySeconds, ir.False[0].At)
		}
	})
	t.Run("malformed lines are reported and skipped", func(t *testing.T) {
		rep := runScenario(t, scenarioNamed("malformed"))
		l := rep.Log
		if l.Malformed != 9 || l.UnknownChannel != 3 || l.OutOfOrder != 1 || l.Reordered != 1 || l.Attempts != 7 {
			t.Fatalf("summary %+v", l)
		}
		if rep.Problems[0].Line != 2 || rep.Problems[0].Kind != KindMalformed {
			t.Errorf("first problem %+v", rep.Problems[0])
		}
	})
}

func TestDeterministicJSON(t *testing.T) {
	for _, name := range []string{"bank", "incidents"} {
		var outs [2]bytes.Buffer
		for i := range outs {
			if err := runScenario(t, scenarioNamed(name)).WriteJSON(&outs[i]); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(outs[0].Bytes(), outs[1].Bytes()) {
			t.Errorf("%s: two runs on the same input differ", name)
		}
	}
}

// TestFailoverModel: a request fails with failover only when every candidate's logged attempts
// around its time failed; evidence from the request's own attempts comes first.
func TestFailoverModel(t *testing.T) {
	var l logBuilder
	// 10:00:00 both channels fail (the logging proxy tried both): fails with failover too.
	l.request(t10, "gpt-4o", "openai-direct", "server_error", "azure-eastus", "server_error")
	// 10:00:30 openai fails, azure answers: failover saves it.
	l.request(t10.Add(30*time.Second), "gpt-4o", "openai-direct", "server_error", "azure-eastus", "success")
	// 10:01:00 openai fails and was not failed over; azure's nearest logged attempt (10:01:02,
	// itself a request that failed on both, by its own attempt and openai's nearest) failed.
	l.request(t10.Add(60*time.Second), "gpt-4o", "openai-direct", "server_error", "", "")
	l.attempt(t10.Add(62*time.Second), "other", "azure-eastus", "gpt-4o", 1, "timeout", 10000)
	// 10:02:00 openai fails, no evidence on azure within 10 s: azure is assumed to answer.
	l.request(t10.Add(120*time.Second), "gpt-4o", "openai-direct", "server_error", "", "")
	setup, err := NewSetup(mustPolicies(t, chatPolicy), nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), setup, bytes.NewReader(l.buf.Bytes()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := rep.Models[0].Requests
	if m.Requests != 5 || m.FailedWithoutFailover != 5 || m.FailedAsLogged != 4 || m.FailedWithPolicy != 3 || m.Assumed != 1 {
		t.Fatalf("%+v", m)
	}
}

func mustPolicies(t testing.TB, yaml string) []v1alpha1.RoutingPolicy {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := routing.LoadManifests(p)
	if err != nil {
		t.Fatal(err)
	}
	return in.Policies
}

// TestCommand runs the subcommand with flags: a gzipped log on stdin, JSON out, the same
// bytes as the golden report.
func TestCommand(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(bankLog())
	zw.Close()
	var out, errb bytes.Buffer
	args := []string{"--policy", filepath.Join("testdata", "bank", "policy.yaml"), "--log", "-", "--format", "json"}
	if err := Command(context.Background(), args, &gz, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	want, err := os.ReadFile(filepath.Join("testdata", "bank", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("gzipped stdin gives a different report than the file:\n%s", out.String())
	}

	out.Reset()
	args = []string{"--policy", filepath.Join("..", "..", "config", "samples", "chat-gpt4o.yaml"),
		"--log", filepath.Join("testdata", "incidents", "log.jsonl"),
		"--incidents", filepath.Join("testdata", "incidents", "incidents.jsonl")}
	if err := Command(context.Background(), args, nil, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	for _, want := range []string{"Model gpt-4o: policy chat-gpt4o", "Model gpt-4o-mini: policy chat-gpt4o-mini",
		"detected after 4s (ConsecutiveFailures)", "false ejection"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table output lacks %q:\n%s", want, out.String())
		}
	}

	for _, bad := range [][]string{
		{"--log", "x.jsonl"},
		{"--policy", filepath.Join("testdata", "bank", "policy.yaml"), "--log", "missing.jsonl"},
		{"--policy", filepath.Join("testdata", "bank", "policy.yaml"), "--log", "-", "--format", "xml"},
		{"--policy", filepath.Join("testdata", "bank", "log.jsonl"), "--log", "-"},
		{"--policy", filepath.Join("testdata", "bank", "policy.yaml"), "--log", "-", "--incidents", filepath.Join("testdata", "bank", "log.jsonl")},
	} {
		if err := Command(context.Background(), bad, strings.NewReader(""), &out, &errb); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}

// TestLoggedProbesAnswerReplayedProbes: the logging proxy moved all traffic off openai-direct and
// only probed it ("probe": true). Those probes answer the replayed policy's probes, and they are
// not client requests.
func TestLoggedProbesAnswerReplayedProbes(t *testing.T) {
	var l logBuilder
	for i := range 5 { // 5 failures in a row: ejected at 10:00:04
		l.request(t10.Add(time.Duration(i)*time.Second), "gpt-4o", "openai-direct", "server_error", "azure-eastus", "success")
	}
	for s := 10; s < 420; s += 2 { // client traffic goes to Azure from then on
		l.request(t10.Add(time.Duration(s)*time.Second), "gpt-4o", "azure-eastus", "success", "", "")
	}
	for s := 300; s < 400; s += 5 { // the logging proxy probes openai-direct every 5 s
		l.raw(fmt.Sprintf(`{"ts":%q,"requestId":"","channel":"openai-direct","model":"gpt-4o","attempt":1,"status":200,"outcome":"success","latencyMs":900,"ttftMs":0,"stream":false,"probe":true}`,
			t10.Add(time.Duration(s)*time.Second+500*time.Millisecond).Format("2006-01-02T15:04:05.000Z07:00")))
	}
	setup, err := NewSetup(mustPolicies(t, chatPolicy), nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), setup, strings.NewReader(sortLines(l.buf.String())), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Log.Probes != 20 || rep.Log.Requests != 5+205 {
		t.Fatalf("log summary %+v", rep.Log)
	}
	c := channelReport(t, rep, "openai-direct")
	var reasons []string
	for _, e := range c.Events {
		reasons = append(reasons, e.Reason)
	}
	if len(reasons) < 3 || reasons[2] != "ProbesPassed" || c.Probes.Answered != 3 {
		t.Fatalf("events %v, probes %+v", reasons, c.Probes)
	}
}

// sortLines orders log lines by their "ts" prefix (the builder writes them per source).
func sortLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	slices.SortStableFunc(lines, func(a, b string) int { return strings.Compare(a[7:31], b[7:31]) })
	return strings.Join(lines, "\n") + "\n"
}

// TestNamespacedChannels: a cluster proxy logs a channel as namespace/name. A policy in namespace
// llm replays such a log, and a log that names the channels alone (a standalone proxy, or one
// written before channels were namespaced), to the same report.
func TestNamespacedChannels(t *testing.T) {
	policy := strings.Replace(chatPolicy, "  name: chat-gpt4o\n", "  name: chat-gpt4o\n  namespace: llm\n", 1)
	run := func(prefix string) *Report {
		t.Helper()
		var l logBuilder
		for i := range 40 {
			l.request(t10.Add(time.Duration(i)*time.Second), "gpt-4o", prefix+"openai-direct", "server_error", prefix+"azure-eastus", "success")
		}
		setup, err := NewSetup(mustPolicies(t, policy), nil)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Run(context.Background(), setup, bytes.NewReader(l.buf.Bytes()), Options{})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	full, short := run("llm/"), run("")
	if len(full.Problems) != 0 || len(full.Channels) != 2 || full.Channels[0].Channel != "llm/openai-direct" {
		t.Fatalf("namespaced log: %+v %+v", full.Problems, full.Channels)
	}
	if full.Channels[0].Ejections == 0 {
		t.Errorf("llm/openai-direct failed 40 times and was not ejected: %+v", full.Channels[0])
	}
	a, _ := json.Marshal(full)
	b, _ := json.Marshal(short)
	if !bytes.Equal(a, b) {
		t.Errorf("a log without namespaces replays differently:\n%s\n%s", a, b)
	}

	// The other way round: manifests without a namespace (applied with kubectl -n) replay a
	// cluster's log, which names the channels llm/...; a second namespace's lines for the same
	// name are not mixed in.
	var l logBuilder
	for i := range 40 {
		l.request(t10.Add(time.Duration(i)*time.Second), "gpt-4o", "llm/openai-direct", "server_error", "llm/azure-eastus", "success")
	}
	l.request(t10.Add(41*time.Second), "gpt-4o", "other/openai-direct", "success", "", "")
	setup, err := NewSetup(mustPolicies(t, chatPolicy), nil)
	if err != nil {
		t.Fatal(err)
	}
	bare, err := Run(context.Background(), setup, bytes.NewReader(l.buf.Bytes()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if bare.Channels[0].Channel != "openai-direct" || bare.Channels[0].Ejections == 0 || len(bare.Problems) != 1 || !strings.Contains(bare.Problems[0].Message, "other/openai-direct") {
		t.Errorf("bare manifests, namespaced log: channels %+v problems %+v; want openai-direct ejected and the other namespace's line unknown", bare.Channels, bare.Problems)
	}
}

// TestSetupIsTheCompiledTable: replay's routes are routing.Compile's: for the sample manifests
// (residency, per-channel weights, two policies) every model has the compiled policy's candidates
// in its order, with its weights and settings.
func TestSetupIsTheCompiledTable(t *testing.T) {
	path := filepath.Join("..", "..", "config", "samples", "chat-gpt4o.yaml")
	setup, err := LoadSetup(path, "")
	if err != nil {
		t.Fatal(err)
	}
	in, err := routing.LoadManifests(path)
	if err != nil {
		t.Fatal(err)
	}
	in.Secrets = nil
	for i := range in.Channels {
		in.Channels[i].Spec.CredentialsRef = nil
	}
	tbl, problems := routing.Compile(in)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if len(setup.Models) == 0 {
		t.Fatal("no models")
	}
	for _, mr := range setup.Models {
		p, ok := tbl.PolicyFor(mr.Model)
		if !ok {
			t.Fatalf("%s: not in the compiled table", mr.Model)
		}
		var want []string
		for _, pc := range p.Channels {
			if ch, _ := tbl.Channel(pc.Channel); ch != nil {
				if _, serves := ch.Upstream(mr.Model); serves {
					want = append(want, fmt.Sprintf("%s/%d", pc.Channel, pc.Weight))
				}
			}
		}
		var got []string
		for _, c := range mr.Candidates {
			got = append(got, fmt.Sprintf("%s/%d", c.Channel, c.Weight))
		}
		if !slices.Equal(got, want) || !reflect.DeepEqual(mr.Settings, p.Settings) || mr.MaxAttempts != p.Retry.MaxAttempts {
			t.Errorf("%s: replay routes %v (%+v), the compiled table %v (%+v)", mr.Model, got, mr.Settings, want, p.Settings)
		}
	}
}
