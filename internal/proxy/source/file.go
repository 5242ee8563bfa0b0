package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// KeyEnvPrefix: SWITCHYARD_KEY_<CHANNEL> overrides a channel's provider key in standalone mode
// (channel name upper-cased, every character that is not a letter or digit replaced by "_").
const KeyEnvPrefix = "SWITCHYARD_KEY_"

// KeyEnvName is the environment variable that overrides a channel's key.
func KeyEnvName(channel string) string {
	b := []byte(strings.ToUpper(channel))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	return KeyEnvPrefix + string(b)
}

// LoadFiles reads and compiles the manifests at path, applying key overrides from the environment.
// Unlike FileSource it isolates nothing: an object with a problem fails the whole load.
func LoadFiles(path string, getenv func(string) string) (*routing.Table, []routing.Problem, error) {
	in, err := routing.LoadManifests(path)
	if err != nil {
		return nil, nil, err
	}
	c, err := compileInputs(in, getenv, nil)
	if err != nil {
		return nil, c.problems, err
	}
	if len(c.held) > 0 {
		return nil, c.problems, fmt.Errorf("config has %d problem(s): %s", len(routing.Blocking(c.problems)), problemList(routing.Blocking(c.problems)))
	}
	return c.table, c.problems, nil
}

// compiled is what compileInputs makes of the manifests.
type compiled struct {
	// table is what to serve: every object that compiled as compiled, one with a problem in its
	// last good form or left out (routing.Isolate), on-call overrides applied.
	table *routing.Table
	// channels are the channel objects read: a rejected config still passes their on-call
	// overrides on.
	channels []v1alpha1.ProviderChannel
	problems []routing.Problem
	// held are the objects with a problem and how each is served.
	held []routing.Held
}

// compileInputs is the rest of LoadFiles. Objects are isolated as the controller isolates them:
// one with a problem is served as it was in last (the table serving now, nil when none) or left
// out, and the rest serves. It fails only when nothing would serve, or for what is no one
// object's problem.
func compileInputs(in routing.Inputs, getenv func(string) string, last *routing.Table) (compiled, error) {
	c := compiled{channels: in.Channels}
	in.KeyOverrides = map[string]string{}
	// SWITCHYARD_KEY_<NAME> for a channel without a namespace, SWITCHYARD_KEY_<NAMESPACE>_<NAME>
	// for one with: never the bare name then, or dev/prod-openai would take prod/openai's key
	// (both SWITCHYARD_KEY_PROD_OPENAI once upper-cased). Two channels whose variable is the same
	// refuse the config rather than share a key.
	owner := map[string]string{}
	for _, ch := range in.Channels {
		id := routing.ChannelID(ch.Namespace, ch.Name)
		env := KeyEnvName(id)
		if other, taken := owner[env]; taken && other != id {
			return c, fmt.Errorf("channels %s and %s would both take their key from %s: rename one", other, id, env)
		}
		owner[env] = id
		if v := getenv(env); v != "" {
			in.KeyOverrides[id] = v
		}
	}
	t, problems := routing.Compile(in)
	// GatewayClients (keys from Secret manifests beside them): a broken one refuses the config,
	// so a typo cannot silently lock a team out or let it in.
	clients, clientProblems := routing.CompileClients(in)
	t.Clients = clients
	c.problems = append(problems, clientProblems...)
	if blocking := routing.Blocking(clientProblems); len(blocking) > 0 {
		return c, fmt.Errorf("config has %d problem(s): %s", len(blocking), problemList(blocking))
	}
	c.table = t
	if len(routing.Blocking(problems)) > 0 {
		isolated, held, more := routing.Isolate(t, problems, last)
		c.problems, c.held = append(c.problems, more...), held
		c.table = routing.WithOverrides(isolated, in.Channels)
		c.table.Clients = t.Clients
	}
	if len(c.table.Policies) == 0 {
		if blocking := routing.Blocking(c.problems); len(blocking) > 0 {
			return c, fmt.Errorf("config has %d problem(s) and nothing else to serve: %s", len(blocking), problemList(blocking))
		}
		return c, errors.New("config has no RoutingPolicy: nothing to serve")
	}
	return c, nil
}

func problemList(ps []routing.Problem) string {
	msgs := make([]string, len(ps))
	for i, p := range ps {
		msgs[i] = p.String()
	}
	return strings.Join(msgs, "; ")
}

// heldError is the rejection recorded for the objects held back of a config that serves.
func heldError(held []routing.Held, problems []routing.Problem) error {
	msgs := make([]string, 0, len(held))
	for _, h := range held {
		msgs = append(msgs, fmt.Sprintf("%s %s (%s): %s", h.Kind, heldName(h), servedText(h.Served), heldProblem(h, problems)))
	}
	return fmt.Errorf("%d object(s) with a problem held back, the rest of the config serves: %s", len(held), strings.Join(msgs, "; "))
}

func heldName(h routing.Held) string {
	if h.Namespace == "" {
		return h.Name
	}
	return h.Namespace + "/" + h.Name
}

func servedText(s routing.Served) string {
	if s == routing.ServedLastGood {
		return "its last good form serves"
	}
	return "left out"
}

// heldProblem is the first blocking problem of h's object.
func heldProblem(h routing.Held, problems []routing.Problem) string {
	for _, p := range problems {
		if p.HoldsBack() && p.Kind == h.Kind && p.Namespace == h.Namespace && p.Name == h.Name {
			return p.Message
		}
	}
	return "a problem"
}

// Timings of FileSource.Watch.
const (
	// debounceDelay gathers the burst of file events one edit makes into one read.
	debounceDelay = 100 * time.Millisecond
	// stuckAfter is how long a read may take before it is reported (a hung mount).
	stuckAfter = 10 * time.Second
)

// FileSource loads the standalone config from a file or directory and reloads it when it
// changes or when Reload is signalled (SIGHUP). Changes are seen through file events on the
// directory (for a single file, its parent: a mounted ConfigMap swaps a "..data" symlink), and
// every Interval by a poll that compares each manifest's size, mtime and inode, so it reads
// nothing while nothing changed. A read that failed is retried at every poll until one succeeds.
//
// Only regular files are read, each at most routing.MaxManifestBytes. Reads run off Watch's
// goroutine, one at a time: a read hung on a dead mount is reported after 10s (as a rejected
// config) and does not hold up SIGHUP or shutdown; the triggers that arrive meanwhile make one
// read once it finishes.
type FileSource struct {
	Path     string
	Interval time.Duration
	Getenv   func(string) string
	Reload   <-chan struct{}

	mu   sync.Mutex // one load at a time
	sum  string     // hash of the bytes last read, and applied or rejected
	last []stamp    // the fingerprint taken before that read

	// readFailed: the last read failed or has hung, so the next poll reads again whatever the
	// fingerprint says, and a read of the same bytes as before is applied, not skipped.
	readFailed atomic.Bool

	recMu    sync.Mutex // orders the results recorded on the Sink
	loading  bool       // Watch's work is running and has recorded nothing yet (a stuck report is still true)
	recorded string     // the error this source last recorded ("" after a good load)

	read       func(string) ([]routing.ManifestFile, error) // tests; default routing.ReadManifestFiles
	stuckAfter time.Duration                                // tests; default stuckAfter
}

// Load does one load now; it applies the table or records the rejection.
func (f *FileSource) Load(s Sink) error { return f.load(s, true) }

// Start does the first load, like Load, but gives up when ctx ends: a read hung on a dead mount
// must not keep the process from exiting on SIGTERM.
func (f *FileSource) Start(ctx context.Context, s Sink) error {
	done := make(chan error, 1)
	go func() { done <- f.Load(s) }()
	warn := time.NewTimer(f.stuckBound())
	defer warn.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-warn.C:
			s.Logger().Warn("Reading the config has not finished; still waiting (a hung mount?)", "source", f.Path, "after", f.stuckBound().String())
		case <-ctx.Done():
			return fmt.Errorf("gave up: reading the config had not finished when the proxy was stopped (a hung mount?): %w", context.Cause(ctx))
		}
	}
}

// load reads the config once and applies it or records why not. Unless force is set, bytes
// identical to the last read are not applied again (a touch, an unrelated event).
func (f *FileSource) load(s Sink, force bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	stamps, stampErr := fingerprint(f.Path) // before the read: a change during it shows at the next poll
	files, err := f.readFiles()

	f.recMu.Lock()
	defer f.recMu.Unlock()
	f.loading = false
	if err != nil {
		f.readFailed.Store(true)
		// The files that could be read still carry an on-call `disabled: true`.
		overrode := false
		if len(files) > 0 {
			if in, perr := routing.ParseManifests(files); perr == nil {
				overrode = f.applyOverrides(s, in.Channels, err, nil)
			}
		}
		if !overrode {
			f.reject(s, err, nil, force)
		}
		return err
	}
	wasFailed := f.readFailed.Swap(false)
	f.last = nil
	if stampErr == nil {
		f.last = stamps
	}
	sum := sumFiles(files)
	if !force && !wasFailed && sum == f.sum {
		return nil
	}
	f.sum = sum
	in, err := routing.ParseManifests(files)
	if err != nil {
		f.reject(s, err, nil, true)
		return err
	}
	c, err := compileInputs(in, f.getenv(), s.Serving())
	if err != nil {
		// The last good table keeps serving, but an on-call `disabled: true` edited in at the
		// same time as a mistake elsewhere must still take effect.
		if !f.applyOverrides(s, c.channels, err, c.problems) {
			f.reject(s, err, c.problems, true)
		}
		return err
	}
	for _, p := range c.problems {
		if !p.HoldsBack() {
			s.Logger().Warn("A fallback hop will not be followed", "problem", p.String())
		}
	}
	for _, h := range c.held {
		s.Logger().Warn("Held back a config object with a problem; the rest of the config serves", "kind", h.Kind, "namespace", h.Namespace,
			"name", h.Name, "served", string(h.Served), "problem", heldProblem(h, c.problems))
	}
	if len(c.held) > 0 {
		// Recorded with the table, as a rejection: the admin API names the objects and
		// switchyard_config_stale is 1 until the files are fixed.
		err := heldError(c.held, c.problems)
		s.ApplyRejected(c.table, f.Path, err, c.problems)
		f.recorded = err.Error()
		return nil
	}
	s.Apply(c.table, f.Path)
	f.recorded = ""
	return nil
}

// applyOverrides applies the channels' disabled fields to the table serving now, if that changes
// anything, publishing it together with err, the rejection of the config they came with; it
// reports whether it did (if not, the caller records err). The caller holds recMu.
func (f *FileSource) applyOverrides(s Sink, channels []v1alpha1.ProviderChannel, err error, problems []routing.Problem) bool {
	cur := s.Serving()
	if cur == nil || channels == nil {
		return false
	}
	over := routing.WithOverrides(cur, channels)
	if over.Hash() == cur.Hash() {
		return false
	}
	s.ApplyRejected(over, f.Path, err, problems)
	f.recorded = err.Error()
	return true
}

// reject records err unless it is the error already shown and always is false, so a read error
// that persists is logged once, not at every poll. The caller holds recMu.
func (f *FileSource) reject(s Sink, err error, problems []routing.Problem, always bool) {
	if !always && err.Error() == f.recorded {
		return
	}
	s.RejectConfig(f.Path, err, problems)
	f.recorded = err.Error()
}

// reportStuck records a load that has run for longer than d, if it still runs.
func (f *FileSource) reportStuck(s Sink, d time.Duration) {
	f.recMu.Lock()
	defer f.recMu.Unlock()
	if !f.loading {
		return
	}
	f.readFailed.Store(true)
	f.reject(s, fmt.Errorf("reading the config has not finished after %s (a hung mount?); the last good config keeps serving and reloads wait for the read", d), nil, true)
}

// The kinds of work Watch asks for, weakest first; pending requests merge into the strongest.
const (
	workNone  = iota
	workCheck // poll: read only if the fingerprint changed or the last read failed
	workRead  // file event: read, apply if the bytes changed
	workForce // SIGHUP: read and apply
)

// Watch reloads on change until ctx ends.
func (f *FileSource) Watch(ctx context.Context, s Sink) {
	interval := f.Interval
	if interval <= 0 {
		interval = time.Second
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()

	w, err := fsnotify.NewWatcher()
	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	if err != nil {
		s.Logger().Warn("No file events for the config; polling only", "source", f.Path, "interval", interval.String(), "error", err.Error())
		w = nil
	} else {
		events, watchErrs = w.Events, w.Errors
		defer func() { go w.Close() }() // not waited for: it may wait on a watch hung on a dead mount
	}
	addFailed := false // reported once

	pending := workCheck       // at once: catches a change between the first load and the watch
	busy, hung := false, false // a run of work is going; it has been reported stuck
	done := make(chan struct{}, 1)
	var stuck, debounce <-chan time.Time
	var stuckTimer *time.Timer
	for {
		if !busy && pending != workNone {
			kind := pending
			pending, busy, hung = workNone, true, false
			stuckTimer = time.NewTimer(f.stuckBound())
			stuck = stuckTimer.C
			go func() {
				defer func() { done <- struct{}{} }()
				f.setLoading(true)
				defer f.setLoading(false)
				if w != nil {
					f.watchDir(s, w, interval, &addFailed)
				}
				f.work(s, kind)
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-f.Reload:
			s.Logger().Info("Reloading config on signal", "source", f.Path)
			if hung {
				s.Logger().Warn("An earlier config read has not finished; the reload waits for it", "source", f.Path)
			}
			pending = max(pending, workForce)
		case <-tick.C:
			pending = max(pending, workCheck)
		case ev, ok := <-events:
			if !ok {
				events = nil
			} else if debounce == nil && f.relevant(ev.Name) {
				debounce = time.After(debounceDelay)
			}
		case err, ok := <-watchErrs:
			if !ok {
				watchErrs = nil
			} else {
				s.Logger().Warn("File events for the config failed; the poll still runs", "source", f.Path, "error", err.Error())
			}
		case <-debounce:
			debounce = nil
			pending = max(pending, workRead)
		case <-done:
			busy = false
			stuckTimer.Stop()
			stuck = nil
		case <-stuck:
			stuck, hung = nil, true
			f.reportStuck(s, f.stuckBound())
		}
	}
}

// watchDir (re)adds the watch of the config's directory. Every run of work does it: a directory
// removed and made again loses its watch. A Stat or an Add on a dead mount may hang; the stuck
// report covers them like a read. A failure is reported once (addFailed).
func (f *FileSource) watchDir(s Sink, w *fsnotify.Watcher, interval time.Duration, addFailed *bool) {
	dir := f.Path
	if st, err := os.Stat(f.Path); err != nil || !st.IsDir() {
		dir = filepath.Dir(f.Path)
	}
	if err := w.Add(dir); err != nil && !*addFailed {
		*addFailed = true
		s.Logger().Warn("No file events for the config; the poll still runs", "dir", dir, "interval", interval.String(), "error", err.Error())
	}
}

// work does one request of Watch.
func (f *FileSource) work(s Sink, kind int) {
	if kind == workCheck && !f.readFailed.Load() {
		stamps, err := fingerprint(f.Path)
		f.mu.Lock()
		same := err == nil && sameStamps(stamps, f.last)
		f.mu.Unlock()
		if same && !f.readFailed.Load() { // (a stuck report during the Stat sets readFailed)
			return
		}
	}
	_ = f.load(s, kind == workForce)
}

// relevant reports whether a file event on name may change the config: on the config itself
// (the file, or the directory), on a manifest in the config directory, or on a name starting
// with ".." (a mounted ConfigMap's "..data" swap). Others (notes, editor files, the neighbours
// of a single config file) cause no read.
func (f *FileSource) relevant(name string) bool {
	name, path := filepath.Clean(name), filepath.Clean(f.Path)
	if name == path {
		return true
	}
	base := filepath.Base(name)
	if strings.HasPrefix(base, "..") {
		return true
	}
	return filepath.Dir(name) == path && routing.IsManifestName(base)
}

func (f *FileSource) setLoading(v bool) {
	f.recMu.Lock()
	f.loading = v
	f.recMu.Unlock()
}

func (f *FileSource) readFiles() ([]routing.ManifestFile, error) {
	if f.read != nil {
		return f.read(f.Path)
	}
	return routing.ReadManifestFiles(f.Path)
}

func (f *FileSource) stuckBound() time.Duration {
	if f.stuckAfter > 0 {
		return f.stuckAfter
	}
	return stuckAfter
}

func (f *FileSource) getenv() func(string) string {
	if f.Getenv != nil {
		return f.Getenv
	}
	return os.Getenv
}

// stamp is what the poll compares of one manifest file: path, size, mtime, mode and identity
// (inode), never its content.
type stamp struct {
	path string
	info os.FileInfo
}

// fingerprint stamps the manifest files LoadManifests would read (following symlinks, so a
// ConfigMap's "..data" swap shows), so an unrelated file beside them does not trigger a read.
func fingerprint(path string) ([]stamp, error) {
	names, err := routing.ManifestFiles(path)
	if err != nil {
		return nil, err
	}
	out := make([]stamp, len(names))
	for i, p := range names {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		out[i] = stamp{p, fi}
	}
	return out, nil
}

func sameStamps(a, b []stamp) bool {
	if len(a) != len(b) || a == nil || b == nil {
		return false
	}
	for i := range a {
		x, y := a[i].info, b[i].info
		if a[i].path != b[i].path || x.Size() != y.Size() || !x.ModTime().Equal(y.ModTime()) || x.Mode() != y.Mode() || !os.SameFile(x, y) {
			return false
		}
	}
	return true
}

// sumFiles hashes the names and contents of the files read.
func sumFiles(files []routing.ManifestFile) string {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%d\x00", f.Path, len(f.Data))
		h.Write(f.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}
