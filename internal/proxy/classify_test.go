package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
)

// TestOneClassificationForEveryStatus: the outcome the proxy gives an upstream status (in its
// access log, and so in the health engine) is health.OutcomeFromStatus's, which replay applies to
// logged lines that carry only a status. A second classification that disagreed (401, 403 and 3xx
// once did) would make replay score a different gateway than the one that ran.
func TestOneClassificationForEveryStatus(t *testing.T) {
	// (3xx: the mock answers only 4xx and 5xx; health's own test covers them.)
	for _, status := range []int{400, 401, 403, 404, 405, 409, 413, 418, 422, 429, 500, 502, 503, 504} {
		r := newRig(t, rigConfig{policy: "panicRouting: false"}) // each status on a healthy channel
		r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: status, Message: "status test"})
		before := len(strings.Split(r.accessLog.String(), "\n"))
		r.post("/v1/chat/completions", chat("gpt-4o", false))
		lines := strings.Split(r.accessLog.String(), "\n")[before-1:]
		found := false
		for _, l := range lines {
			var line struct {
				Channel string `json:"channel"`
				Status  int    `json:"status"`
				Outcome string `json:"outcome"`
			}
			if l == "" || json.Unmarshal([]byte(l), &line) != nil || line.Channel != "chan-a" {
				continue
			}
			found = true
			if want := health.OutcomeFromStatus(status).String(); line.Status != status || line.Outcome != want {
				t.Errorf("HTTP %d: the proxy logged status %d outcome %q, health.OutcomeFromStatus says %q", status, line.Status, line.Outcome, want)
			}
		}
		if !found {
			t.Errorf("HTTP %d: no access-log line for chan-a", status)
		}
	}
}

// TestInsufficientQuotaFailsOverAsAChannelFailure: OpenAI answers 429 insufficient_quota when the
// account is out of credit. No Retry-After ends that, so it is not waited out or treated as a
// request to slow down: it fails over at once and counts against the channel.
func TestInsufficientQuotaFailsOverAsAChannelFailure(t *testing.T) {
	broke := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
	}))
	defer broke.Close()
	r := newRig(t, rigConfig{})
	writeFile(t, r.dir, rigConfig{}.render(broke.URL, r.bURL))
	if err := r.src.Load(r.srv); err != nil {
		t.Fatal(err)
	}
	got := r.post("/v1/chat/completions", chat("gpt-4o", false))
	if got.status != 200 || got.header.Get("X-Switchyard-Channel") != "chan-b" || got.header.Get("X-Switchyard-Attempts") != "2" {
		t.Fatalf("status %d from %q after %s attempts, want 200 from chan-b after 2", got.status, got.header.Get("X-Switchyard-Channel"), got.header.Get("X-Switchyard-Attempts"))
	}
	if !strings.Contains(r.accessLog.String(), `"outcome":"server_error","latencyMs"`) || !strings.Contains(r.accessLog.String(), "insufficient_quota") {
		t.Errorf("the out-of-quota 429 is not logged as the channel's failure:\n%s", r.accessLog.String())
	}
	if c := r.channel("chan-a", "gpt-4o"); c["windowFailures"].(float64) != 1 || c["phase"] == "RateLimited" {
		t.Errorf("an out-of-quota 429 must count as a failure, not a rate limit: %v", c)
	}
}
