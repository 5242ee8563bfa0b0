package proxy

import (
	"bytes"
	"net/http"

	"github.com/switchyard-io/switchyard/internal/proxy/clientapi"
	"github.com/switchyard-io/switchyard/internal/proxy/piimask"
	"github.com/switchyard-io/switchyard/internal/proxy/recovery"
	"github.com/switchyard-io/switchyard/internal/proxy/sse"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// The stream pipeline. relayStream reads the upstream's events and hands each through the
// attempt's stages, in order, on its way to the client. A stage is one feature of a stream (the
// format conversion, the client's usage, the PII restore, the continuation's rewrite, the
// recovery's tap) and knows nothing of the others, nor of the relay's timers, its commit to the
// client and its ends. A new stream feature is one more stage in streamStages.build.

// streamStage is one step of a stream's relay.
type streamStage interface {
	// event takes an event on its way to the client. ev.raw is what the client is to get of it
	// (the stages before may have rewritten it); the stage may rewrite it too, and its verdict
	// says whether the event goes on.
	event(ev *sse.Event) verdict
	// end is what the stage still holds back when the stream ends, cleanly or broken: it goes
	// to the client before the stream's last event (its terminator or the in-band error).
	end() []byte
}

// verdict is what a stage decides about an event.
type verdict uint8

const (
	pass   verdict = iota // on to the next stage, and then to the client
	drop                  // nothing of it goes out; the stages after do not see it
	depart                // the stream is not the answer the client is getting: the attempt fails
)

// maxStages bounds an attempt's stages (build lists them; the Responses numbering stage is only in
// streams without the conversion, and without the recovery's two).
const maxStages = 5

// streamStages is an attempt's stream pipeline, built once when its relay begins. read are the
// stages every upstream event goes through before the relay knows whether the answer has begun
// (a converted event may be held back); the relay commits the client's response at the first
// event they pass on with data, and answer are the stages of the events from then on.
//
// The stages live in this one value (all, and the stage values below), so a stream's pipeline
// costs the relay one allocation, none per stage and none per event. No stage points into the
// attempt: that would move every attempt, streamed or not, to the heap.
type streamStages struct {
	read, answer []streamStage
	// recovered: a broken stream is the recovery's to end, not the relay's (it has a tap).
	recovered bool
	// continues: the attempt goes on with a stream whose headers the client has already.
	continues bool

	all     [maxStages]streamStage
	convert convertStage
	usage   usageStage
	restore restoreStage
	seq     responsesSeqStage
	// ev is the event being relayed. The stages take it by pointer, so it lives here rather
	// than escaping once per event.
	ev sse.Event
	// rc is the relay's write deadline's (relayStream), which would cost an allocation of its own.
	rc http.ResponseController
}

// build lists a's stages in order from its setup.
func (p *streamStages) build(s *Server, a *attempt) {
	translated := a.wire != nil && a.wire.stream != nil
	stages := p.all[:0]
	if translated {
		p.convert = convertStage{a.wire}
		stages = append(stages, &p.convert)
	}
	p.read = stages[:len(stages):len(stages)]
	if !translated && a.path == clientapi.PathResponses {
		// A Responses stream passed through: its in-band error, should it break, goes on from
		// the channel's sequence numbers.
		p.seq.on = true
		stages = append(stages, &p.seq)
	}
	p.usage = usageStage{s: s, call: a.call, channel: a.channel, model: a.model, counted: a.counted,
		meter: a.meter.tap, translated: translated}
	stages = append(stages, &p.usage)
	if a.restore != nil {
		p.restore = restoreStage{r: piimask.NewStreamRestore(a.restore, a.path), translated: translated}
		stages = append(stages, &p.restore)
	}
	if a.cont != nil {
		stages = append(stages, (*contStage)(a.cont))
	}
	if a.meter.tap != nil {
		a.meter.start = a.meter.tap.Sent
		stages = append(stages, (*tapStage)(a.meter.tap))
	}
	p.answer = stages[len(p.read):]
	p.recovered = a.tap != nil
	p.continues = a.cont != nil
}

// run hands ev through stages in order; it stops at the first that does not pass it on.
func run(stages []streamStage, ev *sse.Event) verdict {
	for _, st := range stages {
		if v := st.event(ev); v != pass {
			return v
		}
	}
	return pass
}

// end is what the stages still hold back, in their order.
func (p *streamStages) end() []byte {
	var out []byte
	for _, st := range p.answer {
		out = append(out, st.end()...)
	}
	return out
}

// convertStage translates the upstream's events into the client's API (wire.go): an event the
// converter cannot read is passed over, as a malformed event is.
type convertStage struct{ wire *upstream }

func (c *convertStage) event(ev *sse.Event) verdict {
	if !c.wire.convertEvent(ev) {
		return drop
	}
	return pass
}

func (*convertStage) end() []byte { return nil }

// usageStage counts the stream's usage for the client and the metrics (countTokens), tells the
// meter (which must know a part's usage even when its event is dropped here), and leaves out the
// usage-only chunk the proxy asked for on the client's behalf (stripUsageChunk). It counts on a
// copy of the attempt's counted, which the relay hands back when it ends.
type usageStage struct {
	s          *Server
	call       *clientCall
	channel    *routing.Channel
	model      string
	counted    tokensCounted
	meter      *recovery.Tap
	translated bool
}

func (u *usageStage) event(ev *sse.Event) verdict {
	if ev.Usage != nil {
		u.s.countTokens(u.call, u.channel, u.model, &u.counted, ev.Usage)
		if u.meter != nil {
			u.meter.SawUsage(ev.Usage)
		}
	}
	raw, dropped := u.call.stripUsageChunk(ev, u.translated)
	switch {
	case !dropped:
		return pass
	case len(raw) == 0:
		return drop
	}
	ev.Raw = raw
	return pass
}

func (*usageStage) end() []byte { return nil }

// restoreStage puts the request's masked values back into the stream (piimask.StreamRestore); a
// translated event may carry several chunks, restored one by one (restoreEvents).
type restoreStage struct {
	r          *piimask.StreamRestore
	translated bool
}

func (st *restoreStage) event(ev *sse.Event) verdict {
	if st.translated {
		ev.Raw = restoreEvents(st.r, ev.Raw)
	} else {
		ev.Raw = st.r.Event(ev)
	}
	return pass
}

func (st *restoreStage) end() []byte { return st.r.End() }

// contStage is a continuation's relay as a stage: the same pointer, converted (no allocation).
type contStage recovery.ContRelay

// event rewrites a continuation's event into the rest of the client's stream (ContRelay.Rewrite).
// A continuation that writes another answer departs: that says nothing against its channel.
func (c *contStage) event(ev *sse.Event) verdict {
	out, ok := (*recovery.ContRelay)(c).Rewrite(ev.Raw)
	switch {
	case !ok:
		return depart
	case len(out) == 0:
		return drop
	}
	ev.Raw = out
	return pass
}

func (*contStage) end() []byte { return nil }

// streamMeter is an attempt's tap as its last stage (the recovery's, or one that only counts): a
// stream the client abandons before its usage event counts its tokens anyway (abandonedTokens).
// start is the tap's text count when the attempt's relay began.
type streamMeter struct {
	tap   *recovery.Tap
	start int
}

// tapStage is a recovery tap as a stage: the same pointer, converted (no allocation).
type tapStage recovery.Tap

// event records what the client's stream gets (Tap.Observe).
func (t *tapStage) event(ev *sse.Event) verdict {
	(*recovery.Tap)(t).Observe(ev.Raw)
	return pass
}

func (*tapStage) end() []byte { return nil }

// responsesSeqStage follows the sequence_number of a Responses stream passed through as the
// channel sent it, so that the in-band error ending it, should it break, is numbered next (the
// AI SDK requires the number). It only reads.
type responsesSeqStage struct {
	on   bool
	next int
}

var sequenceNumber = []byte(`"sequence_number":`)

func (st *responsesSeqStage) event(ev *sse.Event) verdict {
	i := bytes.Index(ev.Data, sequenceNumber)
	if i < 0 {
		return pass
	}
	n, digits := 0, 0
	for _, c := range bytes.TrimLeft(ev.Data[i+len(sequenceNumber):], " ") {
		if c < '0' || c > '9' || digits == 9 {
			break
		}
		n, digits = n*10+int(c-'0'), digits+1
	}
	if digits > 0 && n >= st.next {
		st.next = n + 1
	}
	return pass
}

func (*responsesSeqStage) end() []byte { return nil }
