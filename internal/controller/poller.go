package controller

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// Poller reads the proxy replicas' admin API every PollInterval: their live health, aggregated
// into a view the ProviderChannel reconciler turns into status, and their journals, written as
// Events. It runs only on the leader (it writes Events) and never writes status itself: it
// queues the channels whose live data changed by enough to be written (liveNews), the policies
// whose served generation changed, and the GatewayClients whose use or served generation changed
// (enqueueClients); when the count of ready replicas changes and there are clients, it asks for a
// compile (the clients' limits are shared among the replicas).
type Poller struct {
	client  client.Client
	opts    Options
	journal *Journal
	dedup   *deduper
	// queues carry the objects to reconcile to the status controllers.
	queues statusQueues
	// recompile asks the compile reconciler for a compile: the clients' limits are shared by the
	// ready replicas (Publisher.proxyReplicas), so a change of their count changes the table.
	recompile compileKick
	// clientSent is the use last enqueued per client, by client ID (enqueueClients).
	clientSent map[string]clientSent

	mu   sync.RWMutex
	view liveView

	// replicas is the poll loop's memory of each replica, by admin URL.
	replicas map[string]*replicaState
	// pending are journal entries not written yet (see journalEntries).
	pending []reportedEvent
	// rolloutSent is when each rolled-out policy was last enqueued for its live figures.
	rolloutSent map[string]time.Time
	// generations are the served generations by config hash: replicas that serve one table
	// share one map (2,200 objects' generations, 200 times over, were tens of MB).
	generations map[string]map[string]int64
}

// replicaState is what the poll loop remembers of one replica.
type replicaState struct {
	// cursor is where the replica's journal has been read to, across its restarts.
	cursor adminapi.Cursor
	// misses counts polls failed in a row; lastErr is the last failure.
	misses  int
	lastErr string
	last    *adminapi.ChannelsResponse
	// view is the replica's channel×models, merged from its deltas (?since=cursor), as
	// aggregate reads them.
	view adminapi.View[liveState]
	// config is the replica's config state as last read, etag its ETag on ConfigPath ("" when
	// it came with a full view, or from a proxy without the endpoint).
	config adminapi.ConfigState
	etag   string
}

// target is one replica's admin API root.
type target struct{ Name, URL string }

func newPoller(c client.Client, opts Options, j *Journal, queues statusQueues, recompile compileKick) *Poller {
	return &Poller{
		client:      c,
		opts:        opts,
		journal:     j,
		dedup:       newDeduper(opts.JournalDedupWindow, opts.JournalMaxAge),
		queues:      queues,
		recompile:   recompile,
		clientSent:  map[string]clientSent{},
		replicas:    map[string]*replicaState{},
		rolloutSent: map[string]time.Time{},
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: only the leader journals.
func (p *Poller) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable.
func (p *Poller) Start(ctx context.Context) error {
	t := time.NewTicker(p.opts.PollInterval)
	defer t.Stop()
	for {
		p.poll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// View returns the live view of the last poll.
func (p *Poller) View() liveView {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.view
}

type pollResult struct {
	target   target
	channels *adminapi.ChannelsResponse
	events   *adminapi.EventsResponse
	err      error
}

// poll reads every replica once, updates the view, journals new transitions and enqueues the
// channels whose live data changed.
func (p *Poller) poll(ctx context.Context) {
	log := logf.FromContext(ctx).WithName("poller")
	targets, err := p.targets(ctx)
	if err != nil {
		log.Error(err, "Failed to discover proxy replicas", "service", p.opts.ProxyNamespace+"/"+p.opts.ProxyService)
	}
	results := make([]pollResult, len(targets))
	// At most PollConcurrency replicas at a time, each with its own PollTimeout from when its
	// turn comes: hundreds of replicas polled at once held hundreds of answers in memory, and
	// one timeout for the whole poll failed the slowest replicas for the others' sake.
	sem := make(chan struct{}, p.opts.PollConcurrency)
	var wg sync.WaitGroup
	for i, t := range targets {
		st := p.replicas[t.URL]
		if st == nil {
			st = &replicaState{view: newLiveView()}
			p.replicas[t.URL] = st
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = p.pollReplica(ctx, t, st)
		})
	}
	wg.Wait()

	now := p.opts.Clock.Now()
	var reports []replicaReport
	var usage []*adminapi.ChannelsResponse // reachable replicas' reports, for the clients' use
	var infos []replicaInfo
	var news []reportedEvent
	seen := map[string]bool{}
	generations := map[string]map[string]int64{}
	for _, r := range results {
		seen[r.target.URL] = true
		st := p.replicas[r.target.URL]
		if r.err != nil {
			st.misses++
			st.lastErr = r.err.Error()
			if st.misses == p.opts.UnreachableAfter {
				log.Info("Proxy replica unreachable", "replica", r.target.Name, "error", st.lastErr)
			}
		} else {
			st.misses, st.lastErr, st.last = 0, "", r.channels
			// A journal from another boot than the live state (a restart between the two
			// reads) is read again from the start on the next poll.
			if r.events != nil && r.events.BootID == r.channels.BootID {
				fresh, _ := st.cursor.Next(r.events)
				for _, e := range fresh {
					news = append(news, reportedEvent{Replica: orDefault(r.events.Replica, r.target.Name), BootID: st.cursor.BootID(), Event: e})
				}
			}
		}
		// One missed poll keeps the replica's last report: a blip is not news worth a status write.
		reachable := st.last != nil && st.misses < p.opts.UnreachableAfter
		if reachable {
			reports = append(reports, replicaReport{Replica: r.target.Name, Channels: st.view.Channels(), Rollouts: st.last.Rollouts})
			usage = append(usage, st.last)
		}
		info := replicaInfo{Name: r.target.Name, Reachable: reachable}
		if reachable {
			cfg := &st.last.Config
			if cfg.Hash != "" && cfg.Generations != nil {
				// The hash covers the table, generations included.
				if shared, ok := p.generations[cfg.Hash]; ok {
					cfg.Generations, st.config.Generations = shared, shared
				}
				generations[cfg.Hash] = cfg.Generations
			}
			info.Hash, info.Generations = cfg.Hash, cfg.Generations
			if f := st.last.Fleet; f != nil {
				info.Fleet = &fleetLink{Connected: f.Connected}
			}
		}
		if !reachable {
			info.Error = orDefault(st.lastErr, "no answer yet")
		}
		infos = append(infos, info)
	}
	for url := range p.replicas {
		if !seen[url] {
			delete(p.replicas, url)
		}
	}
	p.generations = generations
	recordReplicas(p.opts.ProxyNamespace, infos)
	view := liveView{Polled: true, Replicas: infos, Models: aggregate(reports), Clients: aggregateClients(usage, now), Rollouts: aggregateRollouts(reports)}
	if err != nil {
		view.DiscoveryError = err.Error()
	}

	p.mu.Lock()
	prev := p.view
	p.view = view
	p.mu.Unlock()

	channels, err := p.channels(ctx)
	if err != nil {
		log.Error(err, "Failed to list ProviderChannels")
		return
	}
	sort.SliceStable(news, func(i, j int) bool { return news[i].Event.Time.Before(news[j].Event.Time) })
	p.pending = p.journalEntries(ctx, append(p.pending, p.dedup.filter(news, now)...), channels, now)
	for i := range channels {
		pc := &channels[i]
		if liveNews(prev, view, pc, now, p.opts.ScoreStep) && !p.queues.enqueue(ctx, "ProviderChannel", pc.Namespace, pc.Name) {
			return
		}
	}
	clients, ok := p.enqueueClients(ctx, prev, view, now)
	if !ok {
		return
	}
	if clients > 0 && readyReplicas(prev) != readyReplicas(view) {
		// The clients' limits are shared by the ready replicas. After the view is stored: the
		// compile reads the count from it. Without clients the count is not in the table.
		p.recompile.kick()
	}
	significant, minor := rolloutsChanged(prev, view)
	for _, key := range minor {
		if now.Sub(p.rolloutSent[key]) >= rolloutRefresh {
			significant = append(significant, key)
		}
	}
	for _, key := range significant {
		p.rolloutSent[key] = now
		ns, name, _ := strings.Cut(key, "/")
		if !p.queues.enqueue(ctx, "RoutingPolicy", ns, name) {
			return
		}
	}
	if prev.Polled == view.Polled && reflect.DeepEqual(prev.Replicas, view.Replicas) {
		return
	}
	// A replica came, went or loaded another config: the Programmed of the policies whose served
	// generation changed (all of them when a replica came or went) may have changed.
	moved := replicasMoved(prev, view)
	for _, ns := range namespacesOrAll(p.opts.WatchNamespaces) {
		var list v1alpha1.RoutingPolicyList
		if err := p.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			log.Error(err, "Failed to list RoutingPolicies")
			return
		}
		for _, rp := range list.Items {
			if !moved && !servedChanged(prev, view, routing.ObjectKey("RoutingPolicy", rp.Namespace, rp.Name)) {
				continue
			}
			if !p.queues.enqueue(ctx, "RoutingPolicy", rp.Namespace, rp.Name) {
				return
			}
		}
	}
}

// journalEntries writes transitions as Events on their channels and returns those to try again:
// a channel the cache does not show yet, or a failed write. Entries older than JournalMaxAge go.
func (p *Poller) journalEntries(ctx context.Context, entries []reportedEvent, channels []v1alpha1.ProviderChannel, now time.Time) []reportedEvent {
	var retry []reportedEvent
	for _, re := range entries {
		if now.Sub(re.Event.Time) > p.opts.JournalMaxAge {
			continue
		}
		i := slices.IndexFunc(channels, func(pc v1alpha1.ProviderChannel) bool {
			return routing.ChannelID(pc.Namespace, pc.Name) == re.Event.Channel
		})
		if i < 0 {
			retry = append(retry, re)
			continue
		}
		if err := p.journal.Record(ctx, &channels[i], "ProviderChannel", transitionEntry(re)); err != nil {
			logf.FromContext(ctx).Error(err, "Failed to journal a transition", "channel", re.Event.Channel, "model", re.Event.Model)
			retry = append(retry, re)
		}
	}
	return retry
}

// liveNews reports whether a channel's status would change with the live view next: the replicas
// moved or serve another generation of it (ProxiesReporting, Programmed), or one of its models
// moved by enough to be written (nextModels, by the rule that damps status writes, against the
// status as written). Figures that drift by less than a step on every poll queue nothing.
func liveNews(prev, next liveView, pc *v1alpha1.ProviderChannel, now time.Time, step int32) bool {
	if replicasMoved(prev, next) || servedChanged(prev, next, routing.ObjectKey("ProviderChannel", pc.Namespace, pc.Name)) {
		return true
	}
	in := channelInputs{Channel: pc, Now: now, Live: next, ScoreStep: step}
	if effectiveDisabled(&pc.Spec, now) {
		in.DisabledBy = disabledBy(pc)
	}
	return !equality.Semantic.DeepEqual(pc.Status.Models, nextModels(in))
}

// replicasMoved reports whether the replicas themselves changed between two views (polled at
// all, which ones, reachable or not), as opposed to what they serve.
func replicasMoved(prev, next liveView) bool {
	if prev.Polled != next.Polled || len(prev.Replicas) != len(next.Replicas) {
		return true
	}
	for i := range prev.Replicas {
		a, b := prev.Replicas[i], next.Replicas[i]
		if a.Name != b.Name || a.Reachable != b.Reachable || a.Error != b.Error || !equality.Semantic.DeepEqual(a.Fleet, b.Fleet) {
			return true
		}
	}
	return false
}

// servedChanged reports whether some replica serves another generation of the object (key:
// routing.ObjectKey) than before; for a replica that reports no generations, another config.
// Only such objects are reconciled when a replica loads a config: at thousands of objects a
// reconcile of each per reload would cost minutes of CPU. Call it when !replicasMoved.
func servedChanged(prev, next liveView, key string) bool {
	for i := range next.Replicas {
		a, b := prev.Replicas[i], next.Replicas[i]
		if (a.Generations == nil) != (b.Generations == nil) || (b.Generations == nil && a.Hash != b.Hash) {
			return true
		}
		ga, oka := a.Generations[key]
		gb, okb := b.Generations[key]
		if oka != okb || ga != gb {
			return true
		}
	}
	return false
}

// channels lists the watched ProviderChannels from the cache.
func (p *Poller) channels(ctx context.Context) ([]v1alpha1.ProviderChannel, error) {
	var out []v1alpha1.ProviderChannel
	for _, ns := range namespacesOrAll(p.opts.WatchNamespaces) {
		var list v1alpha1.ProviderChannelList
		if err := p.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		out = append(out, list.Items...)
	}
	return out, nil
}

func namespacesOrAll(ns []string) []string {
	if len(ns) == 0 {
		return []string{""}
	}
	return ns
}

// pollReplica reads one replica's live state, merged into st.view from what changed since its
// cursor, its config when that changed (ConfigPath, with its ETag), and its journal from where
// st.cursor stands (all of it after a restart). It runs beside other replicas' polls and is the
// only one to touch st.view, st.config and st.etag while it runs; the rest of st is read only.
func (p *Poller) pollReplica(ctx context.Context, t target, st *replicaState) pollResult {
	ctx, cancel := context.WithTimeout(ctx, p.opts.PollTimeout)
	defer cancel()
	res := pollResult{target: t}
	c := adminapi.Client{HTTP: p.opts.HTTPClient, BaseURL: t.URL}
	resp, err := c.ChannelsSince(ctx, st.view.Cursor())
	if err != nil {
		res.err = err
		return res
	}
	config, etag := resp.Config, ""
	if resp.Delta {
		// A delta carries no config; a replica that answers deltas serves ConfigPath.
		cfg, tag, err := c.Config(ctx, st.etag)
		if err != nil {
			// The delta is not merged: the next poll asks again from the same cursor.
			res.err = err
			return res
		}
		config, etag = st.config, tag
		if cfg != nil {
			config = *cfg
		}
	}
	st.view.Apply(resp)
	st.config, st.etag = config, etag
	// The states live in st.view alone.
	resp.Channels, resp.Removed, resp.Config = nil, nil, config
	res.channels = resp
	ev, err := c.Events(ctx, st.cursor.Since(resp.BootID))
	if err != nil {
		// Live state without the journal is still live; the journal is read again next time.
		logf.FromContext(ctx).Info("Failed to read a proxy journal", "replica", t.Name, "error", err.Error())
		return res
	}
	res.events = ev
	return res
}

// targets are the replicas to poll: the --proxy-admin-url ones and the ready endpoints of the
// proxy Service's admin port.
func (p *Poller) targets(ctx context.Context) ([]target, error) {
	var out []target
	for _, u := range p.opts.AdminURLs {
		u = strings.TrimRight(u, "/")
		out = append(out, target{Name: u, URL: u})
	}
	var err error
	if p.opts.ProxyService != "" {
		var list discoveryv1.EndpointSliceList
		err = p.client.List(ctx, &list, client.InNamespace(p.opts.ProxyNamespace),
			client.MatchingLabels{discoveryv1.LabelServiceName: p.opts.ProxyService})
		if err == nil {
			found := sliceTargets(list.Items, p.opts.AdminPortName)
			if len(found) == 0 && len(list.Items) > 0 && !slicesHavePort(list.Items, p.opts.AdminPortName) {
				// The client Service carries no admin port since the admin Service split: a
				// leftover --proxy-service=switchyard-proxy finds pods but nothing to poll.
				err = fmt.Errorf("the EndpointSlices of Service %s/%s have no port named %q: point --proxy-service at the proxies' admin Service (%s)",
					p.opts.ProxyNamespace, p.opts.ProxyService, p.opts.AdminPortName, DefaultProxyService)
			}
			out = append(out, found...)
		}
	}
	return uniqueTargets(out), err
}

func slicesHavePort(slices []discoveryv1.EndpointSlice, portName string) bool {
	for _, s := range slices {
		for _, sp := range s.Ports {
			if sp.Name != nil && *sp.Name == portName {
				return true
			}
		}
	}
	return false
}

// sliceTargets lists the admin API roots of the ready endpoints in EndpointSlices.
func sliceTargets(slices []discoveryv1.EndpointSlice, portName string) []target {
	var out []target
	for _, s := range slices {
		var port int32
		for _, sp := range s.Ports {
			if sp.Name != nil && *sp.Name == portName && sp.Port != nil {
				port = *sp.Port
			}
		}
		if port == 0 {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready || len(ep.Addresses) == 0 {
				continue
			}
			addr := ep.Addresses[0]
			name := addr
			if ep.TargetRef != nil && ep.TargetRef.Name != "" {
				name = ep.TargetRef.Name
			}
			out = append(out, target{Name: name, URL: "http://" + net.JoinHostPort(addr, strconv.Itoa(int(port)))})
		}
	}
	return out
}

// uniqueTargets drops repeated URLs and sorts by name.
func uniqueTargets(ts []target) []target {
	seen := map[string]bool{}
	var out []target
	for _, t := range ts {
		if !seen[t.URL] {
			seen[t.URL] = true
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// rolloutRefresh bounds how stale a rollout's figures in status may be while they only creep.
const rolloutRefresh = time.Minute

// rolloutsChanged are the policies (namespace/name) being rolled out whose status would show
// something new. significant: a dry-run phase moved (any channel×model: the poller does not
// know which policy routes which key, and rolled-out policies are few), a cohort's success rate
// or mean latency as status shows them changed, or its request count moved by a tenth, or the
// policy came or went. minor: only the counts crept; writing those on every poll would rewrite
// status every poll, so the poller sends them once per rolloutRefresh.
func rolloutsChanged(prev, next liveView) (significant, minor []string) {
	if len(prev.Rollouts) == 0 && len(next.Rollouts) == 0 {
		return nil, nil
	}
	dryMoved := false
	for k, g := range next.Models {
		if prev.Models[k].DryRunPhase != g.DryRunPhase || prev.Models[k].DryRunReason != g.DryRunReason {
			dryMoved = true
			break
		}
	}
	for key, g := range next.Rollouts {
		old, had := prev.Rollouts[key]
		switch {
		case !had || dryMoved || old.Percent != g.Percent || old.DryRun != g.DryRun ||
			cohortMoved(old.Policy, g.Policy) || cohortMoved(old.Listed, g.Listed):
			significant = append(significant, key)
		case old != g:
			minor = append(minor, key)
		}
	}
	for key := range prev.Rollouts {
		if _, still := next.Rollouts[key]; !still {
			significant = append(significant, key)
		}
	}
	sort.Strings(significant)
	sort.Strings(minor)
	return significant, minor
}

func cohortMoved(a, b adminapi.CohortCounts) bool {
	sa, sb := cohortStatus(a), cohortStatus(b)
	d := a.Requests - b.Requests
	if d < 0 {
		d = -d
	}
	return sa.SuccessRate != sb.SuccessRate || sa.MeanLatency != sb.MeanLatency || (d > 0 && d*10 >= max(a.Requests, b.Requests))
}
