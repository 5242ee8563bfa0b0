package proxy

import (
	"bufio"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/proxy/recovery"
)

// BenchmarkStreamSeamGap measures the client-visible gap at a seam: the time from the last
// chunk before a cut to the first chunk of the continuation, against the gap between two chunks
// of an unbroken stream of the same answer, in one run (seam-p50/p99 and plain-p50/p99, in µs).
// It counts nothing as failed: every answer must arrive whole.
func BenchmarkStreamSeamGap(b *testing.B) {
	const full = "one two three four five"
	rr := newRecoveryRig(b, "", recoveryChannel{"openai", true}, recoveryChannel{"openai", true})
	client := &http.Client{Timeout: 10 * time.Second}
	// gap reads one stream and returns the longest silence between two content chunks.
	gap := func() time.Duration {
		resp, err := client.Post(rr.api.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatStreamBody))
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		var last time.Time
		var longest time.Duration
		var text strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				break
			}
			data, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			if strings.Contains(data, `"error"`) {
				b.Fatalf("in-band error: %s", data)
			}
			got := chunkText([]byte(data))
			if got == "" {
				continue
			}
			now := time.Now()
			if !last.IsZero() {
				longest = max(longest, now.Sub(last))
			}
			last = now
			text.WriteString(got)
		}
		if text.String() != full {
			b.Fatalf("client text %q, want %q", text.String(), full)
		}
		return longest
	}
	var seam, plain []time.Duration
	b.ResetTimer()
	for range b.N {
		// Each continuation draws on the retry budget, whose floor (30 in 10 s) a benchmark of
		// this many breaks in the test clock's one second would spend: one break per 10 s.
		rr.clock.Advance(failover.BudgetBuckets * time.Second)
		rr.behave("cut;after=2;splits=4,8,14;text="+full, "continue;splits=6;text="+full)
		seam = append(seam, gap())
		rr.behave("ok;splits=4,8,14;text="+full, "continue;text="+full)
		plain = append(plain, gap())
	}
	b.StopTimer()
	pct := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[min(len(d)-1, int(float64(len(d))*p))].Microseconds())
	}
	b.ReportMetric(pct(seam, .5), "seam-p50-µs")
	b.ReportMetric(pct(seam, .99), "seam-p99-µs")
	b.ReportMetric(pct(plain, .5), "plain-p50-µs")
	b.ReportMetric(pct(plain, .99), "plain-p99-µs")
}

// chunkText is a chat chunk's content, its exact bytes.
func chunkText(data []byte) string {
	var c recovery.ChatChunkView
	if json.Unmarshal(data, &c) != nil || len(c.Choices) == 0 {
		return ""
	}
	s, _ := recovery.RawJSONString(c.Choices[0].Delta.Content)
	return string(s)
}

// BenchmarkStreamRecoveryTap: what watching a stream for recovery costs an unbroken stream,
// streamRecovery Continue (the default) against Error, side by side.
func BenchmarkStreamRecoveryTap(b *testing.B) {
	for _, mode := range []string{"Error", "Continue"} {
		b.Run(mode, func(b *testing.B) {
			rr := newRecoveryRig(b, "streamRecovery: "+mode+"\nmaxContinuations: 0", recoveryChannel{"openai", true})
			if mode == "Continue" {
				rr = newRecoveryRig(b, "streamRecovery: Continue", recoveryChannel{"openai", true})
			}
			rr.behave("ok;chunks=64")
			client := &http.Client{Timeout: 10 * time.Second}
			b.ResetTimer()
			for range b.N {
				resp, err := client.Post(rr.api.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatStreamBody))
				if err != nil {
					b.Fatal(err)
				}
				buf := make([]byte, 32<<10)
				for {
					if _, err := resp.Body.Read(buf); err != nil {
						break
					}
				}
				resp.Body.Close()
			}
		})
	}
}
