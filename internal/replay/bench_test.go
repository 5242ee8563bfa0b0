package replay

import (
	"context"
	"io"
	"os"
	"strconv"
	"testing"
	"time"
)

const benchPolicies = `apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata:
  name: chat-gpt4o
spec:
  models: [gpt-4o]
  channels: [{name: openai-direct}, {name: azure-eastus}, {name: reseller}]
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata:
  name: chat-gpt4o-mini
spec:
  models: [gpt-4o-mini]
  channels: [{name: openai-direct}, {name: azure-eastus}, {name: reseller}]
`

// genLog streams a synthetic access log of n lines: 200 attempts/s over 3 channels × 2 models,
// 0.5% noise, and every 20 minutes a 3-minute outage of openai-direct (60% 503s, failed over to
// the next channel). It never holds more than one batch of lines.
type genLog struct {
	n, i int
	buf  []byte
	pos  int
}

var genChannels = [...]string{"openai-direct", "azure-eastus", "reseller"}
var genModels = [...]string{"gpt-4o", "gpt-4o-mini"}

func (g *genLog) Read(p []byte) (int, error) {
	if g.pos == len(g.buf) {
		if g.i >= g.n {
			return 0, io.EOF
		}
		g.buf, g.pos = g.buf[:0], 0
		for k := 0; k < 256 && g.i < g.n; k++ {
			g.buf = g.line(g.buf, g.i)
			g.i++
		}
	}
	n := copy(p, g.buf[g.pos:])
	g.pos += n
	return n, nil
}

func (g *genLog) line(b []byte, i int) []byte {
	ts := t10.Add(time.Duration(i) * 5 * time.Millisecond)
	req := i / 2
	ch := (req / 2) % 3
	attempt := 1
	if i%2 == 1 {
		ch, attempt = (ch+1)%3, 2
	}
	model := genModels[req%2]
	min := int(ts.Sub(t10) / time.Minute)
	status, outcome, lat := 200, "success", 700+(i*37)%900
	outage := ch == 0 && min%20 >= 5 && min%20 < 8
	switch {
	case attempt == 1 && outage && i%5 < 3, attempt == 1 && i%199 == 0:
		status, outcome, lat = 503, "server_error", 150
	case attempt == 2 && i%97 == 0:
		status, outcome, lat = 429, "rate_limited", 40
	}
	b = append(b, `{"ts":"`...)
	b = ts.AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = append(b, `","requestId":"r-`...)
	b = strconv.AppendInt(b, int64(req), 10)
	b = append(b, `","channel":"`...)
	b = append(b, genChannels[ch]...)
	b = append(b, `","model":"`...)
	b = append(b, model...)
	b = append(b, `","attempt":`...)
	b = strconv.AppendInt(b, int64(attempt), 10)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"outcome":"`...)
	b = append(b, outcome...)
	b = append(b, `","latencyMs":`...)
	b = strconv.AppendInt(b, int64(lat), 10)
	b = append(b, `,"ttftMs":0,"stream":true}`+"\n"...)
	return b
}

func benchSetup(tb testing.TB) *Setup {
	s, err := NewSetup(mustPolicies(tb, benchPolicies), nil)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// BenchmarkReplay replays 200,000 lines per iteration and reports lines/s.
func BenchmarkReplay(b *testing.B) {
	setup := benchSetup(b)
	const lines = 200_000
	total := 0
	b.ReportAllocs()
	for b.Loop() {
		rep, err := Run(context.Background(), setup, &genLog{n: lines}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if rep.Log.Attempts != lines {
			b.Fatalf("replayed %d of %d lines: %+v", rep.Log.Attempts, lines, rep.Problems)
		}
		total += lines
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "lines/s")
}

// TestWriteBenchLog writes the benchmark's synthetic log for measuring the command itself:
//
//	SWITCHYARD_BENCH_LOG=/tmp/big.jsonl SWITCHYARD_BENCH_LINES=1000000 go test ./internal/replay -run TestWriteBenchLog
func TestWriteBenchLog(t *testing.T) {
	path := os.Getenv("SWITCHYARD_BENCH_LOG")
	if path == "" {
		t.Skip("set SWITCHYARD_BENCH_LOG to write the benchmark log")
	}
	n, err := strconv.Atoi(os.Getenv("SWITCHYARD_BENCH_LINES"))
	if err != nil {
		n = 1_000_000
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, &genLog{n: n}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".policy.yaml", []byte(benchPolicies), 0o644); err != nil {
		t.Fatal(err)
	}
}
