package controller

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/routing"
	"github.com/switchyard-io/switchyard/internal/testutil"
)

// A channel's TLS client certificate is read from its Secret, watched like a credentialsRef: the
// channel waits for the Secret, then publishes; a rotated certificate reaches the proxies'
// credentials, and never the ConfigMap.
func TestChannelTLSClientCertificateIsWatchedAndPublished(t *testing.T) {
	h := startController(t, "tls", nil)
	ca := testutil.NewCA(t)
	pemBlock := func(s string, depth int) string {
		pad := strings.Repeat(" ", depth)
		return "|\n" + pad + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n"+pad)
	}
	h.apply(`apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: a}
spec:
  provider: openai
  baseURL: https://models.internal.example:8443/v1
  models: [{name: gpt-4o}]
  tls:
    caBundle: ` + pemBlock(ca.PEM, 6) + `
    clientCertificateRef: {name: mtls}
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec:
  models: [gpt-4o]
  channels: [{name: a}]
`)
	NewWithT(t).Eventually(func(g Gomega) {
		pc := &v1alpha1.ProviderChannel{}
		g.Expect(h.c.Get(t.Context(), h.key("a"), pc)).To(Succeed())
		acc := condition(pc.Status.Conditions, v1alpha1.ConditionAccepted)
		g.Expect(acc).NotTo(BeNil())
		g.Expect(acc.Reason).To(Equal(routing.ReasonSecretNotFound))
		g.Expect(acc.Message).To(ContainSubstring("spec.tls.clientCertificateRef"))
	}).WithTimeout(20 * time.Second).Should(Succeed())

	secret := func(crt, key string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata: {name: mtls}\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: " + pemBlock(crt, 4) + "\n  tls.key: " + pemBlock(key, 4) + "\n"
	}
	crt1, key1 := ca.Issue(t, "switchyard", true)
	h.apply(secret(crt1, key1))
	h.waitGood([]string{"a"}, []string{"chat"})
	keyPart := routing.CredentialPart(h.id("a"), routing.PartTLSKey)
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(h.credentials(g)[keyPart]).To(Equal(key1))
	}).WithTimeout(20 * time.Second).Should(Succeed())

	crt2, key2 := ca.Issue(t, "switchyard-rotated", true)
	h.apply(secret(crt2, key2))
	NewWithT(t).Eventually(func(g Gomega) {
		creds := h.credentials(g)
		g.Expect(creds[keyPart]).To(Equal(key2))
		g.Expect(creds[routing.CredentialPart(h.id("a"), routing.PartTLSCert)]).To(Equal(crt2))
	}).WithTimeout(20 * time.Second).Should(Succeed())
	g := NewWithT(t)
	for _, v := range h.configMap(g).Data {
		g.Expect(v).NotTo(ContainSubstring("PRIVATE KEY"))
	}
	for _, v := range h.configMap(g).BinaryData {
		g.Expect(string(v)).NotTo(ContainSubstring("PRIVATE KEY")) // gzip would hide it; a small table is not gzipped
	}
}
