package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/audit"
)

func (r *rig) get(url string) (int, string) {
	r.t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitUntil waits for the audit writer's goroutine, bounded (no timing rule is tested).
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 5000; i++ {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the audit writer did not get there")
}

// While the audit log cannot be written and keys are required, the proxy refuses with 503
// audit_unavailable and /readyz fails; once the file can be written again it serves, and the
// file verifies with a gap record counting the lost line.
func TestAuditRequired(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.Mkdir(path, 0o700); err != nil { // a path that cannot be opened as a file
		t.Fatal(err)
	}
	log, err := audit.Open(audit.Options{Path: path})
	if err != nil {
		t.Fatalf("the proxy must start: %v", err)
	}
	r := newRigOpts(t, rigConfig{}, func(o *Options) { o.Audit = log })
	r.writeClients(clientsManifest("one: "+clientKeyOne, ""))
	key := []string{"Authorization", "Bearer " + clientKeyOne}
	got := r.post("/v1/chat/completions", chat("gpt-4o", false), key...)
	if got.status != 503 || errorCode(t, got.body) != "audit_unavailable" || got.header.Get("Retry-After") == "" {
		t.Fatalf("unwritable audit log: %d %s", got.status, got.body)
	}
	got = r.post("/v1/messages", `{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", clientKeyOne)
	if got.status != 503 || !strings.Contains(got.body, `"type":"error"`) || !strings.Contains(got.body, "overloaded_error") {
		t.Fatalf("/v1/messages with an unwritable audit log: %d %s", got.status, got.body)
	}
	if code, body := r.get(r.admin.URL + "/readyz"); code != 503 || !strings.Contains(body, "audit") {
		t.Fatalf("/readyz %d %s", code, body)
	}
	_, metrics := r.get(r.admin.URL + "/metrics")
	for _, want := range []string{"switchyard_audit_writable 0", `switchyard_audit_segments_started_total{reason="unreadable_file"} 1`,
		`switchyard_audit_segments_started_total{reason="torn_tail"} 0`, `switchyard_audit_reopened_total{reason="deleted"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %q:\n%s", want, grepLines(metrics, "switchyard_audit"))
		}
	}
	waitUntil(t, func() bool { return log.Lost() >= 2 })

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	// The refusal's own line is the write that finds the log works again (or the writer's
	// retry, if it came first).
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false), key...); got.status != 503 && got.status != 200 {
		t.Fatalf("%d %s", got.status, got.body)
	}
	waitUntil(t, log.Writable)
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false), key...); got.status != 200 {
		t.Fatalf("writable again: %d %s", got.status, got.body)
	}
	if code, _ := r.get(r.admin.URL + "/readyz"); code != 200 {
		t.Fatalf("/readyz %d once the log is writable", code)
	}
	_, metrics = r.get(r.admin.URL + "/metrics")
	for _, want := range []string{"switchyard_audit_writable 1", `switchyard_audit_reopened_total{reason="write_error"} 1`, "switchyard_audit_lines_lost_total 2"} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %q:\n%s", want, grepLines(metrics, "switchyard_audit"))
		}
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(path)
	if err != nil || rep.Lines != 2 || rep.Gaps != 1 || rep.Lost != 2 || rep.FirstStart != audit.StartUnreadableFile {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

// Without keys required (the default then) or with AuditRequiredNever, an unwritable audit log
// does not stop the proxy: the lines are counted as lost.
func TestAuditNotRequired(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys bool
		req  AuditRequirement
	}{{"open proxy", false, AuditRequiredWithKeys}, {"never", true, AuditRequiredNever}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.log")
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
			log, _ := audit.Open(audit.Options{Path: path})
			defer log.Close()
			r := newRigOpts(t, rigConfig{}, func(o *Options) { o.Audit = log; o.AuditRequired = tc.req })
			var key []string
			if tc.keys {
				r.writeClients(clientsManifest("one: "+clientKeyOne, ""))
				key = []string{"Authorization", "Bearer " + clientKeyOne}
			}
			if got := r.post("/v1/chat/completions", chat("gpt-4o", false), key...); got.status != 200 {
				t.Fatalf("%d %s", got.status, got.body)
			}
			if code, _ := r.get(r.admin.URL + "/readyz"); code != 200 {
				t.Fatalf("/readyz %d", code)
			}
			waitUntil(t, func() bool { return log.Lost() == 1 })
		})
	}
}

// A refused request with a 1.2 MiB model name writes a bounded audit line, and the next start
// goes on with the chain (the resume used to fail on it).
func TestAuditOversizedModelThenRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	log, err := audit.Open(audit.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	r := newRigOpts(t, rigConfig{}, func(o *Options) { o.Audit = log })
	r.writeClients(clientsManifest("one: "+clientKeyOne, ""))
	huge := "m" + strings.Repeat("x", 1200<<10)
	if got := r.post("/v1/chat/completions", chat(huge, false), "Authorization", "Bearer "+clientKeyOne); got.status != 403 {
		t.Fatalf("%d", got.status)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	first, _, _ := strings.Cut(string(raw), "\n")
	var line audit.Line
	if err := json.Unmarshal([]byte(first), &line); err != nil || line.Status != 403 {
		t.Fatalf("audit line %.300s: %v", first, err)
	}
	if len(line.Model) > audit.MaxField || !strings.HasSuffix(line.Model, audit.TruncatedMark) || len(first) > 2048 {
		t.Fatalf("a model of %d bytes in a line of %d", len(line.Model), len(first))
	}
	log, err = audit.Open(audit.Options{Path: path})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	log.Record(&audit.Line{RequestID: "r", Status: 200, Attempts: []audit.Attempt{}})
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := audit.Verify(path); err != nil || rep.Lines != 2 || len(rep.Segments) != 1 {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

// The access log bounds what a client or an upstream chose with the audit log's helper.
func TestAccessLogBoundsFields(t *testing.T) {
	var buf bytes.Buffer
	huge := strings.Repeat("é", 1<<20)
	newAccessLog(&buf).write(&accessLogLine{RequestID: "r", Model: huge, RequestedModel: huge, CohortKey: huge, Error: huge, ErrorCode: huge})
	var got accessLogLine
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"model": got.Model, "requestedModel": got.RequestedModel, "cohortKey": got.CohortKey, "errorCode": got.ErrorCode} {
		if len(v) > audit.MaxField || !strings.HasSuffix(v, audit.TruncatedMark) {
			t.Errorf("%s: %d bytes", name, len(v))
		}
	}
	if len(got.Error) > audit.MaxError || !strings.HasSuffix(got.Error, audit.TruncatedMark) {
		t.Errorf("error: %d bytes", len(got.Error))
	}
	if buf.Len() > 4*audit.MaxField+audit.MaxError+400 {
		t.Errorf("line of %d bytes", buf.Len())
	}
}
