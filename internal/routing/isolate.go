package routing

import (
	"fmt"
	"slices"
	"sort"
)

// Served says how a problem object stands in the published table.
type Served string

const (
	// ServedLastGood: an existing object whose latest edit does not compile keeps serving the
	// form last published (traffic is safer on the last good channel than on none).
	ServedLastGood Served = "LastGood"
	// ServedLeftOut: a new object with a problem (or one whose last good form cannot stand any
	// more) is not in the published table.
	ServedLeftOut Served = "LeftOut"
)

// Held is one problem object and how it is served.
type Held struct {
	Kind, Namespace, Name string
	Served                Served
}

// Isolate is per-object isolation: the table to publish when some objects have problems. Every
// object that compiled is published as compiled; an object with a problem is published as it was
// in last (the table published before, nil when none) when it was there, or left out. One team's
// broken object thus never holds back another team's change. It is pure; compiled and last are
// not modified.
//
// A restored policy keeps only those of its channels the result has, and is left out when none
// remain. It keeps its models too: a compiled policy that claims one of them and did not route it
// before is left out instead, with a ModelConflict problem (returned, for its status), so a team
// whose policy breaks for a moment does not lose its model to a newcomer.
func Isolate(compiled *Table, problems []Problem, last *Table) (*Table, []Held, []Problem) {
	out := &Table{Credentials: map[string]Secret{}}
	for k, v := range compiled.Credentials {
		out.Credentials[k] = v
	}
	broken := map[string]bool{}
	var order []Problem // one per object, in a stable order
	for _, p := range Blocking(problems) {
		k := p.Kind + "/" + QualifiedName(p.Namespace, p.Name)
		if !broken[k] {
			broken[k] = true
			order = append(order, p)
		}
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind // ProviderChannel before RoutingPolicy: policies need channels
		}
		return QualifiedName(a.Namespace, a.Name) < QualifiedName(b.Namespace, b.Name)
	})
	for _, ch := range compiled.Channels {
		if !broken["ProviderChannel/"+QualifiedName(ch.Namespace, ch.Name)] {
			out.Channels = append(out.Channels, ch)
		}
	}
	var held []Held
	// Channels first: a restored policy needs them.
	for _, p := range order {
		if p.Kind != "ProviderChannel" {
			continue
		}
		h := Held{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name, Served: ServedLeftOut}
		if ch, ok := lastChannel(last, p.Namespace, p.Name); ok {
			// out holds every compiled channel: an ID taken there (a duplicate) stays taken.
			k, hasKey := last.Credentials[ch.ID()]
			if _, taken := out.Channel(ch.ID()); !taken && (hasKey || !ch.HasCredentials) {
				// (A channel that needs a key is only restored with it: without, every proxy
				// would refuse the whole table.)
				out.Channels = append(out.Channels, ch)
				if hasKey && ch.HasCredentials {
					out.Credentials[ch.ID()] = k
				}
				h.Served = ServedLastGood
			}
		}
		held = append(held, h)
	}
	// A broken policy that served before keeps its models: a newcomer that claims one of them
	// meanwhile (a compiled policy that did not route it in last) must not take it over.
	restorable := map[string]Policy{} // namespace/name -> its last good form, channels that remain
	reserved := map[string]string{}   // model -> the restorable policy that routed it
	for _, p := range order {
		if p.Kind != "RoutingPolicy" {
			continue
		}
		lp, ok := last.Policy(p.Namespace, p.Name)
		if !ok {
			continue
		}
		pol := *lp
		pol.Channels = slices.DeleteFunc(slices.Clone(lp.Channels), func(pc PolicyChannel) bool {
			_, ok := out.Channel(pc.Channel)
			return !ok
		})
		if len(pol.Channels) == 0 {
			continue
		}
		restorable[QualifiedName(p.Namespace, p.Name)] = pol
		for _, m := range pol.Models {
			reserved[m] = QualifiedName(p.Namespace, p.Name)
		}
	}
	var extra []Problem
	for _, p := range compiled.Policies {
		if broken["RoutingPolicy/"+QualifiedName(p.Namespace, p.Name)] {
			continue
		}
		if m, owner, ok := takesReserved(p, reserved, last); ok {
			extra = append(extra, Problem{Kind: "RoutingPolicy", Namespace: p.Namespace, Name: p.Name, Reason: ReasonModelConflict,
				Message: fmt.Sprintf("model %q is routed by RoutingPolicy %s, whose last good version keeps serving while it has a problem; one policy per model", m, owner)})
			held = append(held, Held{Kind: "RoutingPolicy", Namespace: p.Namespace, Name: p.Name, Served: ServedLeftOut})
			continue
		}
		out.Policies = append(out.Policies, p)
	}
	for _, p := range order {
		if p.Kind != "RoutingPolicy" {
			continue
		}
		h := Held{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name, Served: ServedLeftOut}
		if pol, ok := restorable[QualifiedName(p.Namespace, p.Name)]; ok {
			out.Policies = insertAsInLast(out.Policies, pol, last)
			h.Served = ServedLastGood
		}
		held = append(held, h)
	}
	// Channels in Compile's order, by ID. Policies keep Compile's order (oldest first), restored
	// ones where they stood in last: a table with nothing changed but one broken object restored
	// is the last one, hash and all.
	sort.SliceStable(out.Channels, func(i, j int) bool { return out.Channels[i].ID() < out.Channels[j].ID() })
	// A key belongs to a channel that is in the table.
	for id := range out.Credentials {
		if _, ok := out.Channel(id); !ok {
			delete(out.Credentials, id)
		}
	}
	return out, held, extra
}

// takesReserved reports a model of p that a restorable policy routed in last while p did not.
func takesReserved(p Policy, reserved map[string]string, last *Table) (model, owner string, ok bool) {
	for _, m := range p.Models {
		o, taken := reserved[m]
		if !taken {
			continue
		}
		if lp, was := last.Policy(p.Namespace, p.Name); was && slices.Contains(lp.Models, m) {
			continue // p routed it already: not a newcomer
		}
		return m, o, true
	}
	return "", "", false
}

func lastChannel(t *Table, namespace, name string) (Channel, bool) {
	if t == nil {
		return Channel{}, false
	}
	for _, ch := range t.Channels {
		if ch.Name == name && ch.Namespace == namespace {
			return ch, true
		}
	}
	return Channel{}, false
}

// insertAsInLast inserts p after the nearest policy that came before it in last and is in ps (at
// the front when none is).
func insertAsInLast(ps []Policy, p Policy, last *Table) []Policy {
	li := slices.IndexFunc(last.Policies, func(q Policy) bool { return q.Namespace == p.Namespace && q.Name == p.Name })
	for k := li - 1; k >= 0; k-- {
		prev := last.Policies[k]
		if i := slices.IndexFunc(ps, func(q Policy) bool { return q.Namespace == prev.Namespace && q.Name == prev.Name }); i >= 0 {
			return slices.Insert(ps, i+1, p)
		}
	}
	return slices.Insert(ps, 0, p)
}
