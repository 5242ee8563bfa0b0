package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/routing"
	"github.com/switchyard-io/switchyard/internal/routing/routingtest"
)

// compiledAs is a SyncResult as Sync makes it: in compiled, and published (the compile itself
// when published is nil).
func compiledAs(t *testing.T, in routing.Inputs, published *routing.Table) *SyncResult {
	t.Helper()
	table, problems := routing.Compile(in)
	res := &SyncResult{Compiled: table, Problems: problems, Published: table, objects: objectsOf(&in)}
	if published != nil {
		res.Published, res.HeldBack = published, true
	}
	res.index()
	return res
}

// teamInputs are two teams' objects (5 channels, 5 policies each), with identities.
func teamInputs() routing.Inputs {
	in := routingtest.Teams("llm", 2)
	for i := range in.Channels {
		in.Channels[i].UID, in.Channels[i].Generation = types.UID("c-"+in.Channels[i].Name), 1
	}
	for i := range in.Policies {
		in.Policies[i].UID, in.Policies[i].Generation = types.UID("p-"+in.Policies[i].Name), 1
	}
	return in
}

func refs(objs ...objectRef) []objectRef { return objs }

// TestSnapshotQueuesOnlyWhatItChanges: the first snapshot queues every object; after it, a compile
// queues only the objects whose status it changes: the edited channel (a new generation), a policy
// whose rows change, the object with a new problem; not the others, whose status would be
// written the same.
func TestSnapshotQueuesOnlyWhatItChanges(t *testing.T) {
	in := teamInputs()
	first := newSnapshot(compiledAs(t, in, nil))
	if got := changedObjects(nil, first); len(got) != len(in.Channels)+len(in.Policies) {
		t.Fatalf("the first snapshot queues %d objects, want all %d", len(got), len(in.Channels)+len(in.Policies))
	}
	if got := changedObjects(first, newSnapshot(compiledAs(t, in, nil))); len(got) != 0 {
		t.Errorf("the same compile again queues %v", got)
	}

	// A channel's weight: that channel (its generation), no policy (their rows are the same).
	edited := teamInputs()
	pc := &edited.Channels[3]
	pc.Spec.Weight, pc.Generation = 300, 2
	second := newSnapshot(compiledAs(t, edited, nil))
	want := refs(objectRef{"ProviderChannel", "llm", pc.Name})
	if diff := cmp.Diff(want, changedObjects(first, second)); diff != "" {
		t.Errorf("a weight edit queues (-want +got):\n%s", diff)
	}

	// A channel drops a model: it, and the policy whose rows showed that channel × model.
	dropped := teamInputs()
	pc = &dropped.Channels[0]
	model := pc.Spec.Models[4].Name
	pc.Spec.Models, pc.Generation = pc.Spec.Models[:4], 2
	var policy string
	for _, rp := range dropped.Policies {
		if slices.Contains(rp.Spec.Models, model) {
			policy = rp.Name
		}
	}
	want = refs(objectRef{"ProviderChannel", "llm", pc.Name}, objectRef{"RoutingPolicy", "llm", policy})
	if diff := cmp.Diff(want, changedObjects(first, newSnapshot(compiledAs(t, dropped, nil)))); diff != "" {
		t.Errorf("a dropped model queues (-want +got):\n%s", diff)
	}

	// A policy that breaks while the rest stays published: that policy alone. The others are
	// still served as compiled, so their status does not change.
	broken := teamInputs()
	rp := &broken.Policies[7]
	rp.Spec.Channels, rp.Generation = append(rp.Spec.Channels, v1alpha1.ChannelRef{Name: "ghost"}), 2
	res := compiledAs(t, broken, first.Result.Published)
	if len(routing.Blocking(res.Problems)) == 0 {
		t.Fatal("a policy naming a missing channel compiles")
	}
	want = refs(objectRef{"RoutingPolicy", "llm", rp.Name})
	if diff := cmp.Diff(want, changedObjects(first, newSnapshot(res))); diff != "" {
		t.Errorf("a broken policy queues (-want +got):\n%s", diff)
	}
}

// TestSnapshotVerdictIsForOneGeneration: a status reconcile finds its object's verdict only when
// the snapshot compiled that very object at that generation; otherwise it waits for the compile
// that will queue it.
func TestSnapshotVerdictIsForOneGeneration(t *testing.T) {
	in := teamInputs()
	snap := newSnapshot(compiledAs(t, in, nil))
	pc := in.Channels[0].DeepCopy()
	if v, ok := snap.verdict("ProviderChannel", pc); !ok || v.Compiled.Status != metav1.ConditionTrue || !v.AsCompiled {
		t.Errorf("the compiled generation: %+v, %v", v, ok)
	}
	pc.Generation = 2
	if _, ok := snap.verdict("ProviderChannel", pc); ok {
		t.Error("a newer generation found the older compile's verdict")
	}
	pc.Generation, pc.UID = 1, "recreated"
	if _, ok := snap.verdict("ProviderChannel", pc); ok {
		t.Error("an object recreated under the same name found the old one's verdict")
	}
	if _, ok := (*Snapshot)(nil).verdict("ProviderChannel", pc); ok {
		t.Error("no snapshot yet gave a verdict")
	}
	id := routing.ChannelID("llm", in.Channels[0].Name)
	var want []types.NamespacedName
	for _, rp := range in.Policies[:routingtest.ScaleModels] { // team 0's policies route team 0's channels
		want = append(want, types.NamespacedName{Namespace: "llm", Name: rp.Name})
	}
	got := slices.Clone(snap.policiesRouting(id))
	slices.SortFunc(got, func(a, b types.NamespacedName) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(want, func(a, b types.NamespacedName) int { return strings.Compare(a.Name, b.Name) })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("policies routing %s (-want +got):\n%s", id, diff)
	}
}

// TestLiveNewsFollowsTheStatusRule: the poller queues a channel when its status would be written
// (the rule in significant, against the status as written), not on every move of the figures: a
// score drifting by less than a step on every poll is no news, the same drift adding up past a
// step is, and so are a phase change and a replica going away.
func TestLiveNewsFollowsTheStatusRule(t *testing.T) {
	pc := channel("gpt-4o")
	key := modelKey{"llm/openai-direct", "gpt-4o"}
	view := func(score int32, requests int64) liveView {
		return liveOf(map[modelKey]modelAggregate{key: healthyAgg(score, requests)})
	}
	written := view(90, 100)
	pc.Status = channelStatus(channelInputs{Channel: pc, Now: testStart, Ready: readyTrue, ScoreStep: 5, Live: written})
	now := testStart.Add(time.Minute)

	if !liveNews(liveView{}, written, pc, now, 5) {
		t.Error("the first poll is news")
	}
	prev := written
	for i, v := range []liveView{view(92, 104), view(88, 97), view(93, 110)} {
		if liveNews(prev, v, pc, now, 5) {
			t.Errorf("drift %d within a step of the written status is news", i)
		}
		prev = v
	}
	if !liveNews(view(94, 100), view(95, 100), pc, now, 5) {
		t.Error("a score 5 above the written one (by steps of 1 a poll) is not news")
	}
	degraded := view(90, 100)
	agg := degraded.Models[key]
	agg.Phase, agg.Replicas = v1alpha1.PhaseDegraded, map[string]int32{"Degraded": 3}
	degraded.Models[key] = agg
	if !liveNews(written, degraded, pc, now, 5) {
		t.Error("a phase change is not news")
	}
	gone := view(90, 100)
	gone.Replicas = gone.Replicas[:2]
	if !liveNews(written, gone, pc, now, 5) {
		t.Error("a replica going away is not news")
	}
}

// recordingQueue records what an event handler adds.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	added []reconcile.Request
	after []time.Duration
}

func (q *recordingQueue) AddAfter(r reconcile.Request, d time.Duration) {
	q.added, q.after = append(q.added, r), append(q.after, d)
}

// TestEveryEventIsTheOneCompileRequest: every event the compile watches becomes its one request,
// delayed by CompileDelay (the queue keeps one request however many are added, and the
// earliest time); a status write of an input object is not an event for it.
func TestEveryEventIsTheOneCompileRequest(t *testing.T) {
	opts := Options{ProxyNamespace: "switchyard"}
	if err := opts.complete(); err != nil {
		t.Fatal(err)
	}
	h := toCompile(opts, nil)
	q := &recordingQueue{}
	ctx := context.Background()
	a := &v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "a", Generation: 1}}
	b := &v1alpha1.RoutingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "b", Generation: 1}}
	h.Create(ctx, event.CreateEvent{Object: a}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: b, ObjectNew: b}, q)
	h.Delete(ctx, event.DeleteEvent{Object: a}, q)
	want := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "switchyard", Name: DefaultConfigMapName}}
	if len(q.added) != 3 || slices.ContainsFunc(q.added, func(r reconcile.Request) bool { return r != want }) ||
		slices.ContainsFunc(q.after, func(d time.Duration) bool { return d != DefaultCompileDelay }) {
		t.Errorf("added %v after %v; want %v three times after %s", q.added, q.after, want, DefaultCompileDelay)
	}

	statusOnly := a.DeepCopy()
	statusOnly.Status.Phase = v1alpha1.PhaseEjected
	if compiledChanged.Update(event.UpdateEvent{ObjectOld: a, ObjectNew: statusOnly}) {
		t.Error("a status write triggers a compile")
	}
	spec := a.DeepCopy()
	spec.Generation = 2
	labelled := a.DeepCopy()
	labelled.Labels = map[string]string{"tier": "gold"}
	if !compiledChanged.Update(event.UpdateEvent{ObjectOld: a, ObjectNew: spec}) || !compiledChanged.Update(event.UpdateEvent{ObjectOld: a, ObjectNew: labelled}) {
		t.Error("a spec edit or a label does not trigger a compile")
	}
}

// Client keys of the compile tests: long and random enough to be accepted.
const (
	testClientKey1 = "sk-ctl-1-5e9a3c7f1b8d2e6a4c0f9b3d"
	testClientKey2 = "sk-ctl-2-a4f0c8e2b6d1f9a3e7c5b1d8"
)

// clientInputs are teamInputs with a GatewayClient of team llm whose keys Secret holds keys.
func clientInputs(keys ...string) routing.Inputs {
	in := teamInputs()
	in.Clients = []v1alpha1.GatewayClient{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: "search", UID: "g-search", Generation: 1},
		Spec:       v1alpha1.GatewayClientSpec{KeysSecretRef: v1alpha1.LocalSecretRef{Name: "search-keys"}, Models: []string{"*"}},
	}}
	if keys != nil {
		data := map[string][]byte{}
		for i, k := range keys {
			data[fmt.Sprint("k", i)] = []byte(k)
		}
		in.Secrets = append(in.Secrets, corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: "search-keys"}, Data: data})
	}
	return in
}

// compiledWithClients is compiledAs with the clients compiled in, as Sync does.
func compiledWithClients(t *testing.T, in routing.Inputs) *SyncResult {
	t.Helper()
	table, problems := routing.Compile(in)
	res := &SyncResult{Compiled: table, Problems: problems, Published: table, objects: objectsOf(&in)}
	res.ClientProblems = compileClientsInto(table, in, 2)
	res.index()
	return res
}

// TestSnapshotOfAGatewayClient: a GatewayClient is an inputKind like the others. Its verdict reads
// its own problems (apart: they hold nothing back), a key added to its Secret queues it alone
// (status.keys), and a client whose Secret is missing is not accepted while the channels and
// policies stay Ready.
func TestSnapshotOfAGatewayClient(t *testing.T) {
	client := objectRef{"GatewayClient", "llm", "search"}
	gc := &v1alpha1.GatewayClient{ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: "search", UID: "g-search", Generation: 1}}
	one := newSnapshot(compiledWithClients(t, clientInputs(testClientKey1)))
	v, ok := one.verdict("GatewayClient", gc)
	if !ok || v.Compiled.Status != metav1.ConditionTrue || !v.AsCompiled || v.Published != int32(1) || len(v.Problems) != 0 {
		t.Fatalf("verdict of a client with one key: %+v (found %v)", v, ok)
	}

	two := newSnapshot(compiledWithClients(t, clientInputs(testClientKey1, testClientKey2)))
	if diff := cmp.Diff(refs(client), changedObjects(one, two)); diff != "" {
		t.Errorf("a key added queues (-want +got):\n%s", diff)
	}
	if v, _ := two.verdict("GatewayClient", gc); v.Published != int32(2) {
		t.Errorf("keys after a rotation: %v, want 2", v.Published)
	}

	missing := compiledWithClients(t, clientInputs())
	if missing.HeldBack || len(routing.Blocking(missing.Problems)) != 0 {
		t.Fatalf("a client's problem holds the table back: %v", missing.Problems)
	}
	three := newSnapshot(missing)
	if diff := cmp.Diff(refs(client), changedObjects(two, three)); diff != "" {
		t.Errorf("a missing Secret queues (-want +got):\n%s", diff)
	}
	v, _ = three.verdict("GatewayClient", gc)
	if v.Compiled.Status != metav1.ConditionFalse || v.Compiled.Reason != routing.ReasonSecretNotFound || v.AsCompiled {
		t.Errorf("verdict of a client whose Secret is missing: %+v", v)
	}
	conds := conditionsFor("GatewayClient", "llm", "search", 1, v.Compiled, missing, liveView{}, false, nil)
	if conds.Accepted.Status != metav1.ConditionFalse || !strings.Contains(conds.Accepted.Message, "spec.keysSecretRef") {
		t.Errorf("Accepted of a client whose Secret is missing: %+v", conds.Accepted)
	}
}

// TestCompileKickNeverBlocks: a kick while one waits is dropped (the waiting one is a compile still
// to come), so neither the poller nor the election waits for the compile controller.
func TestCompileKickNeverBlocks(t *testing.T) {
	k := newCompileKick()
	publishOnElection(k)
	for range 3 {
		k.kick()
	}
	if len(k) != 1 {
		t.Fatalf("%d kicks wait, want 1", len(k))
	}
	<-k
	k.kick()
	if len(k) != 1 {
		t.Fatal("a kick after the waiting one was taken is lost")
	}
}

// BenchmarkSnapshotAtScale is what the compile reconciler adds to a compile at the scale of
// BenchmarkControlLoopAtScale (1,000 channels, 200 policies): the verdicts of 1,200 objects and their comparison with the last
// snapshot's, which pick the objects to queue.
func BenchmarkSnapshotAtScale(b *testing.B) {
	in := benchInputs("llm")
	table, problems := routing.Compile(in)
	if len(problems) > 0 {
		b.Fatal(problems)
	}
	res := &SyncResult{Compiled: table, Published: table, PublishedHash: table.Hash(), objects: objectsOf(&in)}
	res.index()
	prev := newSnapshot(res)
	b.ReportAllocs()
	for b.Loop() {
		next := newSnapshot(res)
		if n := len(changedObjects(prev, next)); n != 0 {
			b.Fatalf("%d objects changed", n)
		}
	}
}

// TestEmptyInstallPublishesOnElection: with no object at all (a fresh install), the leader still
// publishes the empty table once, so that the proxies load a config and become ready (and
// `helm install --wait` returns).
func TestEmptyInstallPublishesOnElection(t *testing.T) {
	gm := NewWithT(t)
	h := startController(t, "empty-install", nil)
	gm.Eventually(func(g Gomega) {
		tbl := h.publishedTable(g)
		g.Expect(tbl.Channels).To(BeEmpty())
		g.Expect(tbl.Policies).To(BeEmpty())
	}).WithTimeout(20 * time.Second).Should(Succeed())
}
