package adminapi

import (
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// MaxRemovals bounds the removals a change log remembers: a cursor older than the oldest one
// forgotten gets the full view, so a delta never lists more than this many removed keys.
const MaxRemovals = 4096

// ChannelsHandler serves ChannelsPath from State, the full document, built on each request:
// the full view, or with ?since=CURSOR only the channel×models that changed after the cursor
// (the full view when the cursor is unknown: the first call, a restarted replica, one too old).
// The proxy serves it and the controller's tests and benchmarks serve their stand-ins with it,
// so the encoding a controller reads is the one proxies write.
type ChannelsHandler struct {
	State func() ChannelsResponse
	log   changeLog
}

// ServeHTTP implements http.Handler.
func (h *ChannelsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	doc := h.State()
	h.log.answer(&doc, r.URL.Query().Get("since"))
	WriteJSON(w, r, doc)
}

// ConfigHandler serves ConfigPath: the config's load state alone, which the controller reads
// on every poll to set Programmed. It carries an ETag, and If-None-Match with the current one is
// answered 304 with no body: a config that did not change costs a header.
type ConfigHandler struct {
	State func() ConfigState
}

// ServeHTTP implements http.Handler.
func (h *ConfigHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := json.Marshal(h.State())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:12]) + `"`
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	writeBody(w, r, append(body, '\n'))
}

// WriteJSON writes v as compact JSON (indented with ?pretty), gzipped when the request accepts
// it. At 5,000 channel×models indentation alone was a third of the document.
func WriteJSON(w http.ResponseWriter, r *http.Request, v any) {
	var body []byte
	var err error
	if _, pretty := r.URL.Query()["pretty"]; pretty {
		body, err = json.MarshalIndent(v, "", "  ")
	} else {
		body, err = json.Marshal(v)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeBody(w, r, append(body, '\n'))
}

// gzipMin is the smallest body worth compressing.
const gzipMin = 1024

func writeBody(w http.ResponseWriter, r *http.Request, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Add("Vary", "Accept-Encoding")
	if len(body) < gzipMin || !acceptsGzip(r.Header.Get("Accept-Encoding")) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(w)
	_, _ = zw.Write(body)
	_ = zw.Close()
	gzipWriters.Put(zw)
}

// gzipWriters are reused: a gzip.Writer allocates about 800 KB of tables.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return zw
}}

// acceptsGzip reads an Accept-Encoding header: gzip listed and not refused with q=0.
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q := strings.ReplaceAll(params, " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

// changeLog numbers the changes of a replica's channel×models, so that a cursor (a point in
// that numbering) tells which keys changed after it. It compares each answer's states with the
// last one's: the proxy needs no hook on its request path. Every answer moves the log, whoever
// asks, so several readers (the controller, an operator's curl) each get a correct delta.
type changeLog struct {
	mu sync.Mutex
	// id is random per log: a cursor from another log (a restarted replica) is unknown.
	id   string
	seq  uint64
	keys map[ChannelKey]loggedState
	// removed are the keys gone, oldest first, at most MaxRemovals; floor is the seq of the
	// newest one forgotten: cursors before it would miss a removal and get the full view.
	removed []removal
	floor   uint64
}

type loggedState struct {
	seq   uint64
	state ChannelState
}

type removal struct {
	key ChannelKey
	seq uint64
}

// answer records doc's states as the replica's current ones and, when since is a cursor this
// log knows, cuts doc down to what changed after it. doc always carries the new cursor.
func (l *changeLog) answer(doc *ChannelsResponse, since string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.id == "" {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		l.id = hex.EncodeToString(b)
		l.keys = map[ChannelKey]loggedState{}
	}
	l.record(doc.Channels)
	doc.Cursor = l.id + "." + strconv.FormatUint(l.seq, 10)
	from, ok := l.parse(since)
	if !ok {
		return
	}
	changed := []ChannelState{}
	for _, s := range doc.Channels {
		if l.keys[ChannelKey{s.Channel, s.Model}].seq > from {
			changed = append(changed, s)
		}
	}
	var gone []ChannelKey
	for _, r := range l.removed {
		if r.seq > from {
			gone = append(gone, r.key)
		}
	}
	doc.Channels, doc.Removed, doc.Delta = changed, gone, true
	// The config is served on ConfigPath, with an ETag; at thousands of objects its
	// generations were most of a quiet replica's answer.
	doc.Config = ConfigState{}
}

// record moves the log to states: the keys that differ from the last answer, and those gone,
// get the next sequence number. Nothing changed: the sequence stays, and so does the cursor.
func (l *changeLog) record(states []ChannelState) {
	next := l.seq + 1
	moved := false
	seen := make(map[ChannelKey]struct{}, len(states))
	for _, s := range states {
		k := ChannelKey{s.Channel, s.Model}
		seen[k] = struct{}{}
		old, had := l.keys[k]
		if had && reflect.DeepEqual(old.state, s) {
			continue
		}
		if !had {
			l.unremove(k)
		}
		l.keys[k] = loggedState{seq: next, state: s}
		moved = true
	}
	for k := range l.keys {
		if _, ok := seen[k]; ok {
			continue
		}
		delete(l.keys, k)
		l.removed = append(l.removed, removal{key: k, seq: next})
		moved = true
	}
	if over := len(l.removed) - MaxRemovals; over > 0 {
		l.floor = l.removed[over-1].seq
		l.removed = append(l.removed[:0], l.removed[over:]...)
	}
	if moved {
		l.seq = next
	}
}

// unremove forgets an earlier removal of a key that is back: the delta lists it as changed.
func (l *changeLog) unremove(k ChannelKey) {
	for i, r := range l.removed {
		if r.key == k {
			l.removed = append(l.removed[:i], l.removed[i+1:]...)
			return
		}
	}
}

// parse reads a cursor of this log: ok is false for "", another log's or one before floor.
func (l *changeLog) parse(cursor string) (uint64, bool) {
	id, n, found := strings.Cut(cursor, ".")
	if !found || id != l.id {
		return 0, false
	}
	seq, err := strconv.ParseUint(n, 10, 64)
	if err != nil || seq > l.seq || seq < l.floor {
		return 0, false
	}
	return seq, true
}
