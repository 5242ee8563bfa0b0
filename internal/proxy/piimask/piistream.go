package piimask

import (
	"bytes"
	"strings"

	"github.com/switchyard-io/switchyard/internal/jsonraw"
	"github.com/switchyard-io/switchyard/internal/pii"
	"github.com/switchyard-io/switchyard/internal/proxy/sse"
)

// StreamRestore puts a session's originals back into a streamed answer. A placeholder may be cut
// across events ("[EMA" then "IL_1]"), so each text that arrives in deltas has a
// pii.StreamRestorer of its own, which holds back a tail that may start a placeholder until the
// next delta tells:
//
//   - chat/completions: choices[i].delta.content and .refusal, choices[i].delta.tool_calls[j].function.arguments
//     and the legacy choices[i].delta.function_call.arguments, keyed by the choice's and the tool
//     call's "index";
//   - completions: choices[i].text;
//   - responses: the "delta" of every *.delta event, keyed by its type, item_id, output_index and
//     content_index. Every other Responses event (the *.done events and response.completed carry
//     the whole text) has each of its strings restored as a whole.
//
// Held text is never lost: a choice's is sent when its finish_reason arrives (in that event's own
// delta when it has the member, else in an extra delta event just before it, with the stream's
// id, object, created and model), a Responses delta's before its *.done event, and whatever is left
// before [DONE], response.completed, a clean end, or the in-band error of a broken stream.
type StreamRestore struct {
	ss    *pii.Session
	path  string
	texts map[string]*heldText
	order []string // keys of texts, oldest first: held text goes out in the order it came
	meta  []byte   // `"id":...,"object":...,` of the last chunk, for extra events
	seq   []byte   // responses: the sequence_number of the event being relayed
	buf   []byte
}

// heldText is one text of a stream and what an extra event carrying its held tail needs.
type heldText struct {
	r      *pii.StreamRestorer
	choice string // chat, completions: the choice's raw index
	field  string // "content", "refusal", "text", "tool", "function_call"; responses: the delta event's type
	tool   string // the tool call's raw index
	ids    []byte // responses: `"item_id":...,"output_index":...,"content_index":...`
}

// NewStreamRestore restores the answer of a request to path (after /v1) masked by ss.
func NewStreamRestore(ss *pii.Session, path string) *StreamRestore {
	return &StreamRestore{ss: ss, path: path, texts: map[string]*heldText{}}
}

func (sr *StreamRestore) text(key string, h heldText) *heldText {
	t := sr.texts[key]
	if t == nil {
		h.r = sr.ss.NewStreamRestorer()
		t = &h
		sr.texts[key] = t
		sr.order = append(sr.order, key)
	}
	return t
}

// Event returns what to write for ev: extra events carrying held text first, then ev restored
// (ev.Raw itself when nothing changed).
func (sr *StreamRestore) Event(ev *sse.Event) []byte {
	if ev.NoData || ev.Malformed {
		return ev.Raw
	}
	if ev.Done {
		return append(sr.flush(func(string) bool { return true }, nil), ev.Raw...)
	}
	data := ev.Data
	i := jsonraw.SkipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return ev.Raw
	}
	var pre []byte
	sp := &splice{src: data, ok: true}
	if sr.path == "/responses" {
		pre = sr.responsesEvent(sp, i)
	} else {
		pre = sr.choicesEvent(sp, i)
	}
	if !sp.ok || len(sp.edits) == 0 {
		return append(pre, ev.Raw...)
	}
	return append(pre, rewriteData(ev.Raw, sp.result())...)
}

// choicesEvent restores a chat/completions or completions chunk.
func (sr *StreamRestore) choicesEvent(sp *splice, i int) []byte {
	data := sp.src
	var meta []byte
	var finishing []string
	sp.members(i, func(key []byte, s, e int) {
		switch {
		case jsonraw.KeyIs(key, "id"), jsonraw.KeyIs(key, "object"), jsonraw.KeyIs(key, "created"), jsonraw.KeyIs(key, "model"), jsonraw.KeyIs(key, "system_fingerprint"):
			meta = append(append(append(append(meta, key...), ':'), data[s:e]...), ',')
		case jsonraw.KeyFolds(key, "choices"):
			sp.elements(s, func(s, e int) {
				if c, fin := sr.choice(sp, s); fin {
					finishing = append(finishing, c)
				}
			})
		}
	})
	if meta != nil {
		sr.meta = meta
	}
	var pre []byte
	for _, c := range finishing {
		pre = sr.flush(func(k string) bool { return sr.texts[k].choice == c }, pre)
	}
	return pre
}

// choice restores one element of choices; it reports the choice's index and whether it finishes.
func (sr *StreamRestore) choice(sp *splice, start int) (string, bool) {
	data := sp.src
	if data[start] != '{' {
		return "", false
	}
	index, finished := "0", false
	sp.members(start, func(key []byte, s, e int) {
		switch {
		case jsonraw.KeyFolds(key, "index"):
			index = string(data[s:e])
		case jsonraw.KeyFolds(key, "finish_reason"):
			finished = data[s] == '"' && e-s > 2
		}
	})
	// The index and finish_reason may come after the texts: they are known before any is written.
	sp.members(start, func(key []byte, s, e int) {
		switch {
		case jsonraw.KeyFolds(key, "text") && data[s] == '"':
			sr.write(sp, sr.text(index+"/text", heldText{choice: index, field: "text"}), finished, s, e)
		case jsonraw.KeyFolds(key, "delta"):
			sp.members(s, func(key []byte, s, e int) { sr.delta(sp, index, finished, key, s, e) })
		}
	})
	return index, finished
}

// write restores the string at src[s:e], a part of t. A finishing choice's texts present in
// this event take their held tail with them; the others get an extra event (see choicesEvent).
func (sr *StreamRestore) write(sp *splice, t *heldText, finished bool, s, e int) {
	sp.str(s, e, func(in string) string {
		out := t.r.Write(in)
		if finished {
			out += t.r.Flush()
			sr.forget(t)
		}
		return out
	})
}

// delta restores a member of the delta of the choice index.
func (sr *StreamRestore) delta(sp *splice, index string, finished bool, key []byte, s, e int) {
	data := sp.src
	switch {
	case jsonraw.KeyFolds(key, "content") && data[s] == '"':
		sr.write(sp, sr.text(index+"/content", heldText{choice: index, field: "content"}), finished, s, e)
	case jsonraw.KeyFolds(key, "refusal") && data[s] == '"':
		sr.write(sp, sr.text(index+"/refusal", heldText{choice: index, field: "refusal"}), finished, s, e)
	case jsonraw.KeyFolds(key, "function_call"):
		sp.members(s, func(key []byte, s, e int) {
			if jsonraw.KeyFolds(key, "arguments") && data[s] == '"' {
				sr.write(sp, sr.text(index+"/function_call", heldText{choice: index, field: "function_call"}), finished, s, e)
			}
		})
	case jsonraw.KeyFolds(key, "tool_calls"):
		sp.elements(s, func(s, _ int) { sr.toolCall(sp, index, finished, s) })
	}
}

// toolCall restores the arguments of an element of the delta's tool_calls, keyed by its index
// (which may come after them).
func (sr *StreamRestore) toolCall(sp *splice, index string, finished bool, start int) {
	data := sp.src
	tool, fs, fe := "0", -1, -1
	sp.members(start, func(key []byte, s, e int) {
		switch {
		case jsonraw.KeyFolds(key, "index"):
			tool = string(data[s:e])
		case jsonraw.KeyFolds(key, "function"):
			sp.members(s, func(key []byte, s, e int) {
				if jsonraw.KeyFolds(key, "arguments") && data[s] == '"' {
					fs, fe = s, e
				}
			})
		}
	})
	if fs >= 0 {
		sr.write(sp, sr.text(index+"/tool/"+tool, heldText{choice: index, field: "tool", tool: tool}), finished, fs, fe)
	}
}

// responsesEvent restores a Responses API event.
func (sr *StreamRestore) responsesEvent(sp *splice, i int) []byte {
	data := sp.src
	typ := ""
	var ids []byte
	sr.seq = sr.seq[:0]
	ds, de := -1, -1
	sp.members(i, func(key []byte, s, e int) {
		switch {
		case jsonraw.KeyIs(key, "type"):
			typ, _ = decodeString(data[s:e])
		case jsonraw.KeyIs(key, "item_id"), jsonraw.KeyIs(key, "output_index"), jsonraw.KeyIs(key, "content_index"):
			ids = append(append(append(append(ids, key...), ':'), data[s:e]...), ',')
		case jsonraw.KeyIs(key, "sequence_number"):
			sr.seq = append(sr.seq[:0], data[s:e]...)
		case jsonraw.KeyIs(key, "delta"):
			ds, de = s, e
		}
	})
	switch {
	case strings.HasSuffix(typ, ".delta") && ds >= 0 && data[ds] == '"':
		t := sr.text(typ+"|"+string(ids), heldText{field: typ, ids: ids})
		sp.str(ds, de, t.r.Write)
		return nil
	case strings.HasSuffix(typ, ".done"):
		key := strings.TrimSuffix(typ, ".done") + ".delta|" + string(ids)
		pre := sr.flush(func(k string) bool { return k == key }, nil)
		restoreValue(sp, i, sr.ss)
		return pre
	case typ == "response.completed" || typ == "response.incomplete" || typ == "response.failed":
		pre := sr.flush(func(string) bool { return true }, nil)
		restoreValue(sp, i, sr.ss)
		return pre
	}
	restoreValue(sp, i, sr.ss)
	return nil
}

// End returns the extra events that carry whatever is still held, before the stream ends (a
// clean end without [DONE], or the in-band error of a broken stream).
func (sr *StreamRestore) End() []byte { return sr.flush(func(string) bool { return true }, nil) }

func (sr *StreamRestore) forget(t *heldText) {
	for i, k := range sr.order {
		if sr.texts[k] == t {
			delete(sr.texts, k)
			sr.order = append(sr.order[:i], sr.order[i+1:]...)
			return
		}
	}
}

// flush appends to out an extra event for each text selected by which that holds something, and
// forgets the selected texts.
func (sr *StreamRestore) flush(which func(key string) bool, out []byte) []byte {
	kept := sr.order[:0]
	for _, k := range sr.order {
		t := sr.texts[k]
		if !which(k) {
			kept = append(kept, k)
			continue
		}
		delete(sr.texts, k)
		if held := t.r.Flush(); held != "" {
			out = sr.extraEvent(out, t, held)
		}
	}
	sr.order = kept
	return out
}

// extraEvent appends an event that carries text in t's field, shaped like the stream's own.
func (sr *StreamRestore) extraEvent(out []byte, t *heldText, text string) []byte {
	b := sr.buf[:0]
	str := jsonraw.AppendQuoted(nil, text)
	if sr.path == "/responses" {
		b = append(b, `{"type":`...)
		b = jsonraw.AppendQuoted(b, t.field)
		b = append(b, ',')
		if len(sr.seq) > 0 {
			// The number of the event it goes out before: the held text belongs to that point.
			b = append(b, `"sequence_number":`...)
			b = append(b, sr.seq...)
			b = append(b, ',')
		}
		b = append(b, t.ids...)
		b = append(b, `"delta":`...)
		b = append(b, str...)
		b = append(b, '}')
		out = append(out, "event: "...)
		out = append(out, t.field...)
		out = append(out, '\n')
	} else {
		b = append(b, '{')
		b = append(b, sr.meta...)
		b = append(b, `"choices":[{"index":`...)
		b = append(b, t.choice...)
		switch t.field {
		case "text":
			b = append(b, `,"text":`...)
			b = append(b, str...)
		case "tool":
			b = append(b, `,"delta":{"tool_calls":[{"index":`...)
			b = append(b, t.tool...)
			b = append(b, `,"function":{"arguments":`...)
			b = append(b, str...)
			b = append(b, `}}]}`...)
		case "function_call":
			b = append(b, `,"delta":{"function_call":{"arguments":`...)
			b = append(b, str...)
			b = append(b, `}}`...)
		default: // content, refusal
			b = append(b, `,"delta":{"`...)
			b = append(b, t.field...)
			b = append(b, `":`...)
			b = append(b, str...)
			b = append(b, '}')
		}
		b = append(b, `,"finish_reason":null}]}`...)
	}
	sr.buf = b
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}

// rewriteData is an event's raw bytes with its data lines replaced by data (the other lines,
// such as "event:", kept in place). Data with newlines (pretty-printed JSON) takes one data line
// per line, as SSE requires.
func rewriteData(raw, data []byte) []byte {
	out := make([]byte, 0, len(raw)+len(data))
	wrote := false
	for len(raw) > 0 {
		line := raw
		if j := bytes.IndexByte(raw, '\n'); j >= 0 {
			line = raw[:j+1]
		}
		raw = raw[len(line):]
		if !bytes.HasPrefix(line, []byte("data:")) {
			out = append(out, line...)
			continue
		}
		if wrote {
			continue
		}
		wrote = true
		for _, l := range bytes.Split(data, []byte("\n")) {
			out = append(out, "data: "...)
			out = append(out, l...)
			out = append(out, '\n')
		}
	}
	return out
}
