package proxy

import (
	"fmt"
	"testing"

	"github.com/switchyard-io/switchyard/internal/pii"
	"github.com/switchyard-io/switchyard/internal/proxy/recovery"
	"github.com/switchyard-io/switchyard/internal/proxy/sse"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// TestStreamStagesOrder: each feature of an attempt's setup is one stage, in one order, and only
// the format conversion sees events before the relay commits to the answer.
func TestStreamStagesOrder(t *testing.T) {
	ss := &pii.Session{} // any session: the stage list is what is checked
	tap := &recovery.Tap{}
	for _, tc := range []struct {
		name        string
		a           attempt
		read, after string
		recovered   bool
	}{
		{"plain", attempt{}, "[]", "[*proxy.usageStage]", false},
		{"translated, restored, counted", attempt{wire: &upstream{stream: &messagesPassthrough{}}, restore: ss, meter: streamMeter{tap: &recovery.Tap{CountOnly: true}}},
			"[*proxy.convertStage]", "[*proxy.usageStage *proxy.restoreStage *proxy.tapStage]", false},
		{"continuation", attempt{tap: tap, cont: &recovery.ContRelay{Tap: tap}, meter: streamMeter{tap: tap}},
			"[]", "[*proxy.usageStage *proxy.contStage *proxy.tapStage]", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.a
			a.channel, a.path = &routing.Channel{Name: "c"}, "/chat/completions"
			var p streamStages
			p.build(nil, &a)
			if got := typesOf(p.read); got != tc.read {
				t.Errorf("read stages %s, want %s", got, tc.read)
			}
			if got := typesOf(p.answer); got != tc.after {
				t.Errorf("answer stages %s, want %s", got, tc.after)
			}
			if p.recovered != tc.recovered || p.continues != (a.cont != nil) {
				t.Errorf("recovered %v continues %v", p.recovered, p.continues)
			}
		})
	}
}

func typesOf(stages []streamStage) string {
	var names []string
	for _, st := range stages {
		names = append(names, fmt.Sprintf("%T", st))
	}
	return fmt.Sprint(names)
}

// TestRunStopsAtTheFirstVerdict: a dropped event reaches no later stage.
func TestRunStopsAtTheFirstVerdict(t *testing.T) {
	tap := &recovery.Tap{}
	cont := &recovery.ContRelay{Tap: tap, Seam: recovery.SpliceSeam([]byte("Hello"))}
	ev := sse.Event{Raw: []byte(`data: {"choices":[{"index":0,"delta":{"content":"Bye"}}]}` + "\n\n")}
	if v := run([]streamStage{(*contStage)(cont), (*tapStage)(tap)}, &ev); v != depart || tap.Sent != 0 {
		t.Fatalf("verdict %d, tap saw %d bytes: want depart, none", v, tap.Sent)
	}
}
