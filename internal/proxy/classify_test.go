package proxy

import (
	"encoding/json"
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
