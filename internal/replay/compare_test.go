package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/internal/testutil"
)

// The comparison's log is the incidents scenario's (an hour at 1 request/s on openai-direct,
// every failure failed over to azure-eastus in the log): a hard outage at 10:05, 15% errors
// spread over 10:30:00-10:30:40, five timeouts in a row at 10:45. OLD is chat's defaults.
var (
	cmpDir       = filepath.Join("testdata", "compare")
	cmpLog       = filepath.Join("testdata", "incidents", "log.jsonl")
	cmpIncidents = filepath.Join("testdata", "incidents", "incidents.jsonl")
)

// runCompare runs the subcommand and returns its output, its error's message and the exit
// status main gives it.
func runCompare(t *testing.T, stdin *bytes.Reader, args ...string) (out, msg string, code int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	in := stdin
	if in == nil {
		in = bytes.NewReader(nil)
	}
	err := Command(context.Background(), args, in, &stdout, &stderr)
	if err != nil {
		code = 1
		var ee *ExitError
		if errors.As(err, &ee) {
			code = ee.Code
		}
		msg = err.Error()
	}
	return stdout.String(), msg, code
}

func compareOf(t *testing.T, oldFile, newFile string) *Comparison {
	t.Helper()
	out, msg, code := runCompare(t, nil, "--compare", filepath.Join(cmpDir, oldFile), filepath.Join(cmpDir, newFile),
		"--log", cmpLog, "--incidents", cmpIncidents, "--output", "json")
	if code > 1 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	var c Comparison
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if c.NewWorse != (code == 1) {
		t.Errorf("newWorse %v but exit status %d", c.NewWorse, code)
	}
	return &c
}

// TestCompareGolden prints both comparisons as table and JSON; the worse NEW exits 1, the other 0.
func TestCompareGolden(t *testing.T) {
	for _, tc := range []struct {
		new  string
		code int
	}{{"no-retry.yaml", 1}, {"six-in-a-row.yaml", 0}} {
		name := strings.TrimSuffix(tc.new, ".yaml")
		for _, format := range []string{"table", "json"} {
			out, msg, code := runCompare(t, nil, "--compare", filepath.Join(cmpDir, "old.yaml"), filepath.Join(cmpDir, tc.new),
				"--log", cmpLog, "--incidents", cmpIncidents, "--output", format)
			if code != tc.code {
				t.Errorf("%s %s: exit %d (%s), want %d", name, format, code, msg, tc.code)
			}
			if code == 1 && !strings.HasPrefix(msg, "NEW is worse") {
				t.Errorf("exit 1 with %q", msg)
			}
			ext := map[string]string{"table": ".txt", "json": ".json"}[format]
			testutil.Golden(t, *update, filepath.Join("compare", name+ext), []byte(out))
		}
	}
}

// TestCompareNoRetry: one attempt per request. Every failure the engine has not yet acted on
// reaches the client: the first three of the outage (the next two are already rerouted by
// the falling health score; the fifth ejects), two of the spread errors at 10:30, and two of the
// five timeouts at 10:45. The ejections are the same.
func TestCompareNoRetry(t *testing.T) {
	c := compareOf(t, "old.yaml", "no-retry.yaml")
	f := c.Failed
	if !c.NewWorse || f.OldTotal != 0 || f.NewTotal != 7 || f.OnlyNew != 7 || f.OnlyOld != 0 || f.Both != 0 {
		t.Fatalf("failed requests: %+v (newWorse %v)", f, c.NewWorse)
	}
	var ids []string
	for _, r := range f.OnlyNewExamples {
		ids = append(ids, r.RequestID)
		if r.Attempts != 1 || r.FirstChannel != "openai-direct" {
			t.Errorf("%+v: want 1 attempt on openai-direct", r)
		}
	}
	if got := strings.Join(ids, " "); got != "r-301 r-302 r-305 r-1807 r-1814 r-2701 r-2702" {
		t.Errorf("failed only under NEW: %s", got)
	}
	if f.OnlyNewExamples[0].At != "2026-11-30T10:05:00Z" || f.OnlyNewExamples[0].Line != 301 {
		t.Errorf("first example: %+v", f.OnlyNewExamples[0])
	}
	if e := c.Ejection; e.Old != 2 || e.New != 2 || e.Both != 2 || e.Gained != 0 || e.Lost != 0 {
		t.Errorf("ejections: %+v", e)
	}
	if len(c.Models) != 1 || c.Models[0].Old.FailedWithPolicy != 0 || c.Models[0].New.FailedWithPolicy != 7 {
		t.Errorf("models: %+v", c.Models)
	}
	if !strings.HasPrefix(c.Verdict, "NEW is worse: 7 failed requests against 0") {
		t.Errorf("verdict: %s", c.Verdict)
	}
}

// TestCompareSixInARow: consecutiveFailures 6 loses the false ejection at 10:45 (five timeouts)
// and ejects the real outage one failure (one second) later. No request fails either way.
func TestCompareSixInARow(t *testing.T) {
	c := compareOf(t, "old.yaml", "six-in-a-row.yaml")
	if c.NewWorse || c.Failed.OldTotal != 0 || c.Failed.NewTotal != 0 {
		t.Fatalf("failed: %+v", c.Failed)
	}
	if e := c.Ejection; e.Old != 2 || e.New != 1 || e.Both != 1 || e.Lost != 1 || e.Gained != 0 {
		t.Fatalf("ejections: %+v", e)
	}
	both, lost := c.Ejections[0], c.Ejections[1]
	if both.Change != "both" || both.Old.At != "2026-11-30T10:05:04Z" || both.New.At != "2026-11-30T10:05:05Z" || both.ShiftSeconds != 1 {
		t.Errorf("kept ejection: %+v old %+v new %+v", both, both.Old, both.New)
	}
	if lost.Change != "lost" || lost.Old.At != "2026-11-30T10:45:04Z" || lost.Old.Reason != "ConsecutiveFailures" || lost.New != nil {
		t.Errorf("lost ejection: %+v %+v", lost, lost.Old)
	}
	// The lost ejection kept the channel out 10 min of cooldown (the second, doubled) + 20 s of probes.
	if lost.Old.OutSeconds != 620 {
		t.Errorf("lost ejection out of rotation %vs, want 620", lost.Old.OutSeconds)
	}
	ph := c.Phases[0]
	if ph.Channel != "openai-direct" || ph.Phases[1].Phase != "Ejected" || ph.Phases[1].OldSeconds != 900 || ph.Phases[1].NewSeconds != 300 || ph.Phases[1].DeltaSeconds != -600 {
		t.Errorf("phases: %+v", ph)
	}
	if c.Incidents == nil || c.Incidents.Old.FalseEjections != 1 || c.Incidents.New.FalseEjections != 0 || c.Incidents.New.Detected != 1 {
		t.Errorf("incidents: %+v", c.Incidents)
	}

	// The other way round the lost ejection is gained.
	r := compareOf(t, "six-in-a-row.yaml", "old.yaml")
	if e := r.Ejection; e.Gained != 1 || e.Lost != 0 || e.Both != 1 || r.Ejections[1].Change != "gained" || r.Ejections[1].New.At != "2026-11-30T10:45:04Z" {
		t.Errorf("reversed: %+v %+v", e, r.Ejections)
	}
}

// TestCompareReversed: the better policy as NEW exits 0 and the failures are OLD's only.
func TestCompareReversed(t *testing.T) {
	c := compareOf(t, "no-retry.yaml", "old.yaml")
	if c.NewWorse || c.Failed.OnlyOld != 7 || c.Failed.OnlyNew != 0 || !strings.HasPrefix(c.Verdict, "NEW is better") {
		t.Errorf("%+v %s", c.Failed, c.Verdict)
	}
}

// TestCompareSameAndStdin: a policy against itself shows no difference, and the log read from
// stdin gives the same bytes as the file; two runs give the same bytes.
func TestCompareSameAndStdin(t *testing.T) {
	args := []string{"--compare", filepath.Join(cmpDir, "old.yaml"), filepath.Join(cmpDir, "old.yaml"), "--output", "json"}
	a, msg, code := runCompare(t, nil, append(args, "--log", cmpLog)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	log, err := os.ReadFile(cmpLog)
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := runCompare(t, bytes.NewReader(log), append(args, "--log", "-")...)
	if a != b {
		t.Errorf("stdin and file differ")
	}
	var c Comparison
	if err := json.Unmarshal([]byte(a), &c); err != nil {
		t.Fatal(err)
	}
	if c.Failed.OnlyNew+c.Failed.OnlyOld != 0 || c.Ejection.Gained+c.Ejection.Lost != 0 || c.Ejection.Both != 2 || c.NewLog != nil {
		t.Errorf("self-comparison differs: %+v %+v", c.Failed, c.Ejection)
	}
	for _, pc := range c.Phases {
		for _, ph := range pc.Phases {
			if ph.DeltaSeconds != 0 {
				t.Errorf("%s %s: %+v", pc.Channel, pc.Model, ph)
			}
		}
	}
}

// TestCompareBadInput: every bad input exits 2 with a message that names the problem.
func TestCompareBadInput(t *testing.T) {
	old, nw := filepath.Join(cmpDir, "old.yaml"), filepath.Join(cmpDir, "no-retry.yaml")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--compare", old, "--log", cmpLog}, "--compare takes two paths"},
		{[]string{"--compare=" + old, nw, "--log", cmpLog}, "--compare takes two paths"},
		{[]string{"--compare", old, nw}, "--log is required"},
		{[]string{"--compare", old, nw, "--log", cmpLog, "--output", "xml"}, "--output must be table or json"},
		{[]string{"--compare", old, filepath.Join(cmpDir, "missing.yaml"), "--log", cmpLog}, "NEW " + filepath.Join(cmpDir, "missing.yaml")},
		{[]string{"--compare", cmpLog, nw, "--log", cmpLog}, "OLD " + cmpLog},
		{[]string{"--compare", old, nw, "--log", "missing.jsonl"}, "missing.jsonl"},
		{[]string{"--compare", old, nw, "--log", cmpLog, "--incidents", cmpLog}, "invalid incidents file"},
		{[]string{"--compare", old, nw, "--log", cmpLog, "extra"}, "unexpected arguments"},
	} {
		_, msg, code := runCompare(t, nil, tc.args...)
		if code != 2 || !strings.Contains(msg, tc.want) {
			t.Errorf("%v: exit %d (%s), want 2 and %q", tc.args, code, msg, tc.want)
		}
	}
}
