package routing

import (
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
// remain or when a model of it is routed by a compiled policy now (the model moved on).
func Isolate(compiled *Table, problems []Problem, last *Table) (*Table, []Held) {
	out := &Table{Credentials: map[string]Secret{}}
	for k, v := range compiled.Credentials {
		out.Credentials[k] = v
	}
	broken := map[string]bool{}
	var order []Problem // one per object, in a stable order
	for _, p := range problems {
		k := p.Kind + "/" + qualified(p.Namespace, p.Name)
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
		return qualified(a.Namespace, a.Name) < qualified(b.Namespace, b.Name)
	})
	for _, ch := range compiled.Channels {
		if !broken["ProviderChannel/"+qualified(ch.Namespace, ch.Name)] {
			out.Channels = append(out.Channels, ch)
		}
	}
	claimed := map[string]bool{}
	for _, p := range compiled.Policies {
		if !broken["RoutingPolicy/"+qualified(p.Namespace, p.Name)] {
			out.Policies = append(out.Policies, p)
			for _, m := range p.Models {
				claimed[m] = true
			}
		}
	}

	var held []Held
	for _, p := range order {
		h := Held{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name, Served: ServedLeftOut}
		switch p.Kind {
		case "ProviderChannel":
			if ch, ok := lastChannel(last, p.Namespace, p.Name); ok {
				if _, taken := out.Channel(ch.Name); !taken {
					out.Channels = append(out.Channels, ch)
					delete(out.Credentials, ch.Name)
					if k, ok := last.Credentials[ch.Name]; ok && ch.HasCredentials {
						out.Credentials[ch.Name] = k
					}
					h.Served = ServedLastGood
				}
			}
		case "RoutingPolicy":
			if lp, ok := last.Policy(p.Namespace, p.Name); ok && !slices.ContainsFunc(lp.Models, func(m string) bool { return claimed[m] }) {
				pol := *lp
				pol.Channels = slices.DeleteFunc(slices.Clone(lp.Channels), func(pc PolicyChannel) bool {
					_, ok := out.Channel(pc.Channel)
					return !ok
				})
				if len(pol.Channels) > 0 {
					out.Policies = insertAsInLast(out.Policies, pol, last)
					for _, m := range pol.Models {
						claimed[m] = true
					}
					h.Served = ServedLastGood
				}
			}
		}
		held = append(held, h)
	}
	// Channels in Compile's order, by name. Policies keep Compile's order (oldest first), restored
	// ones where they stood in last: a table with nothing changed but one broken object restored
	// is the last one, hash and all.
	sort.SliceStable(out.Channels, func(i, j int) bool { return out.Channels[i].Name < out.Channels[j].Name })
	// A key belongs to a channel that is in the table.
	for name := range out.Credentials {
		if _, ok := out.Channel(name); !ok {
			delete(out.Credentials, name)
		}
	}
	return out, held
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
