package pii

import (
	"strings"
	"testing"
)

// benchProse is ordinary prompt text in Russian and English with numbers, dates and code, but no PII.
const benchProse = "Привет! Помоги, пожалуйста, составить ответ клиенту о задержке поставки по заказу №48213 " +
	"от 12.03.2024. Сумма заказа 1 234 567 ₸, срок — до 15:00 пятницы. The service runs v1.26.3 on port 8080; " +
	"p95 latency grew from 180 ms to 2.4 s after the 3.2.1 release. Please keep it short, polite and mention " +
	"that the courier will call in advance. Также добавь, что скидка 20% сохраняется до конца месяца, а " +
	"номер обращения 2024-000123 остаётся прежним. for i := 0; i < 1000; i++ { total += prices[i] } "

// benchPII is the same kind of text with an e-mail, a phone, a card and an IIN in it.
const benchPII = "Клиент Ахметова Д. (ИИН 900101300017) пишет с ivan.petrov@mail.ru и просит перезвонить на " +
	"+7 (701) 234-56-78. Оплата картой 4111 1111 1111 1111 не прошла. "

// kb returns about 1 KiB of prompt text.
func kb(withPII bool) string {
	var b strings.Builder
	for b.Len() < 1024 {
		if withPII && b.Len() == 0 {
			b.WriteString(benchPII)
		}
		b.WriteString(benchProse)
	}
	return b.String()[:strings.LastIndexByte(b.String()[:1024], ' ')+1]
}

func BenchmarkMask(b *testing.B) {
	s := mustCompile(b, Config{})
	for _, tc := range []struct {
		name string
		pii  bool
	}{{"pii", true}, {"no-pii", false}} {
		text := kb(tc.pii)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				s.NewSession().Mask(text) // a session per request, as the proxy does
			}
		})
	}
}

func BenchmarkFind(b *testing.B) {
	s := mustCompile(b, Config{})
	for _, tc := range []struct {
		name string
		pii  bool
	}{{"pii", true}, {"no-pii", false}} {
		text := kb(tc.pii)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				s.Find(text)
			}
		})
	}
}

// deltas splits text into 20-byte stream events.
func deltas(text string) []string {
	var out []string
	for len(text) > 20 {
		out = append(out, text[:20])
		text = text[20:]
	}
	return append(out, text)
}

func BenchmarkStreamRestorerEvent(b *testing.B) {
	s := mustCompile(b, Config{})
	masked := s.NewSession()
	m := masked.Mask(kb(true))
	plain := kb(false)
	for _, tc := range []struct {
		name   string
		ss     *Session
		answer string
	}{
		{"placeholders", masked, strings.Repeat(m, 4)},        // the answer quotes the masked values
		{"no-placeholders", masked, strings.Repeat(plain, 4)}, // the request had PII, the answer none
		{"no-pii", s.NewSession(), strings.Repeat(plain, 4)},  // nothing was masked
	} {
		ds := deltas(tc.answer)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			r := tc.ss.NewStreamRestorer()
			i := 0
			for b.Loop() {
				r.Write(ds[i])
				if i++; i == len(ds) {
					r.Flush()
					i = 0
				}
			}
		})
	}
}
