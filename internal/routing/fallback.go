package routing

import (
	"fmt"
	"slices"
)

// AnyNamespace in acceptFallbackFrom accepts fallback from every namespace.
const AnyNamespace = "*"

// AcceptsFallbackFrom reports whether traffic of a policy in namespace may fall back onto this
// policy's models (fallbackModels or contextOverflowModels). A policy's own namespace always
// may; another only when acceptFallbackFrom lists it (or "*"): a fallback into another team's
// namespace runs on that team's channels, keys and quota, which takes that team's consent.
//
// The proxy asks it on every hop with the namespace of the policy that routed the client's
// request (the traffic is that team's, however many hops it takes), so it must not allocate.
func (p *Policy) AcceptsFallbackFrom(namespace string) bool {
	if p.Namespace == namespace {
		return true
	}
	for _, ns := range p.AcceptFallbackFrom {
		if ns == namespace || ns == AnyNamespace {
			return true
		}
	}
	return false
}

// checkFallbacks reports the fallback and context-overflow models of every compiled policy that
// cannot be followed: a model of the policy itself, a model no policy routes, or a model of a
// policy in another namespace that does not accept this one's. The problems go on the policy
// that names the model (the one whose spec would change); the proxy skips such a hop anyway,
// for a policy that keeps serving its last good form.
func (c *compiler) checkFallbacks(t *Table) {
	routedBy := map[string]*Policy{} // model -> the policy that routes it
	for i := range t.Policies {
		for _, m := range t.Policies[i].Models {
			routedBy[m] = &t.Policies[i]
		}
	}
	for _, p := range t.Policies {
		for _, list := range []struct {
			field  string
			models []string
		}{{"spec.fallbackModels", p.FallbackModels}, {"spec.contextOverflowModels", p.ContextOverflowModels}} {
			for _, m := range list.models {
				if slices.Contains(p.Models, m) {
					c.problem("RoutingPolicy", p.Namespace, p.Name, ReasonInvalidSpec,
						fmt.Sprintf("fallback model %q is routed by this policy itself", m))
					continue
				}
				target, ok := routedBy[m]
				if !ok {
					c.problem("RoutingPolicy", p.Namespace, p.Name, ReasonUnknownModel,
						fmt.Sprintf("fallback model %q is not routed by any RoutingPolicy", m))
					continue
				}
				if !target.AcceptsFallbackFrom(p.Namespace) {
					c.problem("RoutingPolicy", p.Namespace, p.Name, ReasonFallbackNotAccepted,
						fmt.Sprintf("%s: model %q is routed by RoutingPolicy %s in another namespace, which does not accept fallback from namespace %s; to allow it, add acceptFallbackFrom: [%s] to RoutingPolicy %s",
							list.field, m, QualifiedName(target.Namespace, target.Name), namespaceOrNone(p.Namespace), consentFor(p.Namespace), QualifiedName(target.Namespace, target.Name)))
				}
			}
		}
	}
}

// consentFor is what acceptFallbackFrom must list to accept namespace: a policy without a
// namespace (standalone manifests may omit it) can only be accepted by "*".
func consentFor(namespace string) string {
	if namespace == "" {
		return `"*"`
	}
	return namespace
}

func namespaceOrNone(namespace string) string {
	if namespace == "" {
		return `"" (none)`
	}
	return namespace
}
