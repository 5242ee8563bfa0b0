package pii

import (
	"fmt"
	"strconv"
	"strings"
)

// The corpus generator. testdata/corpus.tsv is its output, committed; TestCorpusFileIsGenerated
// fails when the two differ, and `go test -run TestCorpusFileIsGenerated -update ./internal/pii`
// rewrites the file.
//
// Check digits are computed here by code of its own (from the published algorithms, written to
// produce digits rather than to verify them), so a misreading in checksum.go does not reproduce
// itself in the corpus; checksum_test.go pins both to published example values.
//
// Negatives are not filtered through the detectors: a random order number that happens to pass
// a checksum stays in the corpus and counts as a false positive.

// rng is splitmix64: tiny, and its sequence never changes with the Go version.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

func (r *rng) between(lo, hi int) int { return lo + r.intn(hi-lo+1) }

func (r *rng) digits(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + r.intn(10))
	}
	return string(b)
}

func (r *rng) pick(xs []string) string { return xs[r.intn(len(xs))] }

func (r *rng) upperAlnum(n int) string {
	const set = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = set[r.intn(len(set))]
	}
	return string(b)
}

func (r *rng) hex(n int) string {
	const set = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = set[r.intn(len(set))]
	}
	return string(b)
}

// ---- check digit generators ----

// genLuhnDigit is the digit that makes payload+digit pass Luhn.
func genLuhnDigit(payload string) string {
	sum := 0
	for i := range len(payload) {
		v := int(payload[len(payload)-1-i] - '0')
		if i%2 == 0 { // these are doubled once the check digit is appended
			v = v * 2
			v = v/10 + v%10
		}
		sum += v
	}
	return strconv.Itoa((10 - sum%10) % 10)
}

// genIBAN returns cc + check digits + bban (ISO 13616: 98 - (bban cc 00 as a number) mod 97).
func genIBAN(cc, bban string) string {
	var num strings.Builder
	for _, c := range bban + cc + "00" {
		if c >= 'A' && c <= 'Z' {
			num.WriteString(strconv.Itoa(int(c-'A') + 10))
		} else {
			num.WriteRune(c)
		}
	}
	s := num.String()
	rem := 0
	for len(s) > 0 { // nine digits at a time
		n := min(9, len(s))
		v, _ := strconv.Atoi(strconv.Itoa(rem) + s[:n])
		rem = v % 97
		s = s[n:]
	}
	return fmt.Sprintf("%s%02d%s", cc, 98-rem, bban)
}

// genKZ returns first11 + its check digit, or "" when the number is never issued.
func genKZ(first11 string) string {
	w1 := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	w2 := []int{3, 4, 5, 6, 7, 8, 9, 10, 11, 1, 2}
	for _, w := range [][]int{w1, w2} {
		s := 0
		for i, c := range first11 {
			s += int(c-'0') * w[i]
		}
		if s%11 < 10 {
			return first11 + strconv.Itoa(s%11)
		}
	}
	return ""
}

func genINNDigit(d string, w []int) string {
	s := 0
	for i, c := range d {
		s += int(c-'0') * w[i]
	}
	return strconv.Itoa(s % 11 % 10)
}

func genINN10(first9 string) string {
	return first9 + genINNDigit(first9, []int{2, 4, 10, 3, 5, 9, 4, 6, 8})
}

func genINN12(first10 string) string {
	d := first10 + genINNDigit(first10, []int{7, 2, 4, 10, 3, 5, 9, 4, 6, 8})
	return d + genINNDigit(d, []int{3, 7, 2, 4, 10, 3, 5, 9, 4, 6, 8})
}

func genSNILS(first9 string) string {
	s := 0
	for i, c := range first9 {
		s += int(c-'0') * (9 - i)
	}
	for s > 101 {
		s %= 101
	}
	if s == 100 || s == 101 {
		s = 0
	}
	return fmt.Sprintf("%s%02d", first9, s)
}

// genEAN13 returns the 12 digits and their EAN-13 check digit (weights 1,3,1,3,...).
func genEAN13(first12 string) string {
	s := 0
	for i, c := range first12 {
		s += int(c-'0') * (1 + 2*(i%2))
	}
	return first12 + strconv.Itoa((10-s%10)%10)
}

// ---- formatting ----

// group writes d in groups of the given sizes joined by sep (the last size repeats).
func group(d string, sep string, sizes ...int) string {
	var parts []string
	for i := 0; len(d) > 0; i++ {
		n := sizes[min(i, len(sizes)-1)]
		n = min(n, len(d))
		parts = append(parts, d[:n])
		d = d[n:]
	}
	return strings.Join(parts, sep)
}

// corrupt changes the digit at i (counted from the end, 1 = last) to another digit.
func corrupt(r *rng, s string, fromEnd int) string {
	b := []byte(s)
	for k := len(b) - 1; k >= 0; k-- {
		if b[k] < '0' || b[k] > '9' {
			continue
		}
		if fromEnd--; fromEnd == 0 {
			b[k] = byte('0' + (int(b[k]-'0')+1+r.intn(9))%10)
			break
		}
	}
	return string(b)
}

func mark(label, value string) string { return "{{" + label + ":" + value + "}}" }

// fill replaces each %s in tmpl with the next argument.
func fill(tmpl string, args ...string) string {
	for _, a := range args {
		tmpl = strings.Replace(tmpl, "%s", a, 1)
	}
	return tmpl
}

// ---- values ----

func (r *rng) cardNumber() (digits string, scheme string) {
	type scheme_ struct {
		name   string
		prefix func() string
		length int
	}
	schemes := []scheme_{
		{"visa", func() string { return "4" }, 16},
		{"visa", func() string { return "4" }, 16},
		{"visa19", func() string { return "4" }, 19},
		{"mc", func() string { return strconv.Itoa(r.between(51, 55)) }, 16},
		{"mc2", func() string { return strconv.Itoa(r.between(2221, 2720)) }, 16},
		{"mir", func() string { return "220" + strconv.Itoa(r.between(0, 4)) }, 16},
		{"amex", func() string { return r.pick([]string{"34", "37"}) }, 15},
		{"unionpay", func() string { return "62" }, 16},
		{"jcb", func() string { return strconv.Itoa(r.between(3528, 3589)) }, 16},
		{"maestro", func() string { return r.pick([]string{"6759", "5018", "5038"}) }, 16},
		{"diners", func() string { return "36" }, 14},
		{"discover", func() string { return "6011" }, 16},
	}
	s := schemes[r.intn(len(schemes))]
	p := s.prefix()
	payload := p + r.digits(s.length-1-len(p))
	return payload + genLuhnDigit(payload), s.name
}

func (r *rng) cardWritten(d, scheme string) string {
	switch scheme {
	case "amex":
		if r.intn(2) == 0 {
			return d
		}
		return d[:4] + " " + d[4:10] + " " + d[10:]
	case "diners":
		if r.intn(2) == 0 {
			return d
		}
		return d[:4] + " " + d[4:10] + " " + d[10:]
	}
	switch r.intn(4) {
	case 0:
		return d
	case 1:
		return group(d, "-", 4)
	default:
		return group(d, " ", 4)
	}
}

type ibanCountry struct {
	cc   string
	bban func(r *rng) string
}

var ibanCountries = []ibanCountry{
	{"KZ", func(r *rng) string { return r.digits(3) + r.upperAlnum(13) }},
	{"KZ", func(r *rng) string { return r.pick([]string{"601", "722", "998", "826", "914"}) + "KZT" + r.digits(10) }},
	{"DE", func(r *rng) string { return r.digits(18) }},
	{"GB", func(r *rng) string { return r.pick([]string{"WEST", "BARC", "HBUK", "NWBK", "LOYD"}) + r.digits(14) }},
	{"FR", func(r *rng) string { return r.digits(10) + r.upperAlnum(11) + r.digits(2) }},
	{"NL", func(r *rng) string { return r.pick([]string{"ABNA", "INGB", "RABO"}) + r.digits(10) }},
	{"RU", func(r *rng) string { return "04" + r.digits(7) + "40817810" + r.digits(12) }},
	{"TR", func(r *rng) string { return r.digits(5) + "0" + r.upperAlnum(16) }},
	{"AE", func(r *rng) string { return r.digits(19) }},
	{"CH", func(r *rng) string { return r.digits(5) + r.upperAlnum(12) }},
	{"ES", func(r *rng) string { return r.digits(20) }},
	{"IT", func(r *rng) string { return string(rune('A'+r.intn(26))) + r.digits(10) + r.upperAlnum(12) }},
	{"GE", func(r *rng) string { return "TB" + r.digits(16) }},
	{"AZ", func(r *rng) string { return "NABZ" + r.upperAlnum(20) }},
}

func (r *rng) iban() string {
	c := ibanCountries[r.intn(len(ibanCountries))]
	return genIBAN(c.cc, c.bban(r))
}

func (r *rng) ibanWritten(s string) string {
	if r.intn(3) == 0 {
		return s
	}
	return group(s, " ", 4)
}

// kzIIN returns a Kazakh IIN for a random birth date in 1935-2020.
func (r *rng) kzIIN() string {
	for {
		y := r.between(1935, 2020)
		m := r.between(1, 12)
		d := r.between(1, daysInTest(y, m))
		sex := r.intn(2)
		c := 3 + sex
		if y >= 2000 {
			c = 5 + sex
		}
		first := fmt.Sprintf("%02d%02d%02d%d%s", y%100, m, d, c, r.digits(4))
		if s := genKZ(first); s != "" {
			return s
		}
	}
}

// kzBIN returns a Kazakh BIN registered in 1995-2024.
func (r *rng) kzBIN() string {
	for {
		first := fmt.Sprintf("%02d%02d%d%d%s", r.between(1995, 2024)%100, r.between(1, 12),
			r.between(4, 6), r.between(0, 3), r.digits(5))
		if s := genKZ(first); s != "" {
			return s
		}
	}
}

func daysInTest(y, m int) int {
	return [...]int{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[m-1] +
		map[bool]int{true: 1}[m == 2 && y%4 == 0 && (y%100 != 0 || y%400 == 0)]
}

func (r *rng) region() string { return fmt.Sprintf("%02d", r.between(1, 99)) }

func (r *rng) inn12() string { return genINN12(r.region() + r.digits(8)) }

func (r *rng) inn10() string { return genINN10(r.region() + r.digits(7)) }

func (r *rng) snils() string {
	for {
		first := r.digits(9)
		if n, _ := strconv.Atoi(first); n > 1001998 {
			return genSNILS(first)
		}
	}
}

func (r *rng) snilsWritten(s string) string {
	switch r.intn(5) {
	case 0:
		return s
	case 1:
		return s[:3] + " " + s[3:6] + " " + s[6:9] + " " + s[9:]
	case 2:
		return s[:3] + "-" + s[3:6] + "-" + s[6:9] + "-" + s[9:]
	}
	return s[:3] + "-" + s[3:6] + "-" + s[6:9] + " " + s[9:]
}

// phone returns a phone number in one of the written forms the detector documents.
func (r *rng) phone() string {
	kzMob := func() string {
		return r.pick([]string{"700", "701", "702", "705", "707", "708", "747", "771", "775", "776", "777", "778"})
	}
	ruMob := func() string { return "9" + r.digits(2) }
	sub7 := func(sep1, sep2 string) string { return r.digits(3) + sep1 + r.digits(2) + sep2 + r.digits(2) }
	switch r.intn(22) {
	case 0:
		return "+7 (" + kzMob() + ") " + sub7("-", "-")
	case 1:
		return "+7 " + kzMob() + " " + sub7(" ", " ")
	case 2:
		return "+7" + kzMob() + r.digits(7)
	case 3:
		return "8 (" + kzMob() + ") " + sub7("-", "-")
	case 4:
		return "8-" + ruMob() + "-" + sub7("-", "-")
	case 5:
		return "8 " + ruMob() + " " + sub7(" ", " ")
	case 6:
		return "+7 (" + ruMob() + ") " + sub7("-", "-")
	case 7:
		return "+7 " + ruMob() + " " + r.digits(3) + "-" + r.digits(4)
	case 8:
		return "+7 (" + r.pick([]string{"495", "499", "812", "343", "383"}) + ") " + sub7("-", "-")
	case 9:
		return "8 (" + r.pick([]string{"7172", "7272", "7212", "7122"}) + ") " + r.digits(2) + "-" + r.digits(2) + "-" + r.digits(2)
	case 10:
		return "(" + r.pick([]string{"495", "812", "727"}) + ") " + sub7("-", "-")
	case 11:
		return "+1 (" + r.pick([]string{"415", "212", "646", "312", "206"}) + ") 555-" + r.digits(4)
	case 12:
		return r.pick([]string{"415", "212", "646", "312", "206"}) + "-555-" + r.digits(4)
	case 13:
		return "1-800-" + r.digits(3) + "-" + r.digits(4)
	case 14:
		return "+44 20 " + r.digits(4) + " " + r.digits(4)
	case 15:
		return "+49 30 " + r.digits(7)
	case 16:
		return "+33 1 " + r.digits(2) + " " + r.digits(2) + " " + r.digits(2) + " " + r.digits(2)
	case 17:
		return "+90 212 " + r.digits(3) + " " + r.digits(2) + " " + r.digits(2)
	case 18:
		return "+998 90 " + r.digits(3) + " " + r.digits(2) + " " + r.digits(2)
	case 19:
		return "+86 138 " + r.digits(4) + " " + r.digits(4)
	case 20:
		return r.pick([]string{"415", "212"}) + "." + r.digits(3) + "." + r.digits(4)
	}
	return "8 " + kzMob() + " " + r.digits(3) + " " + r.digits(4)
}

func (r *rng) ipv4() string {
	switch r.intn(4) {
	case 0:
		return fmt.Sprintf("10.%d.%d.%d", r.intn(256), r.intn(256), r.between(1, 254))
	case 1:
		return fmt.Sprintf("192.168.%d.%d", r.intn(256), r.between(1, 254))
	case 2:
		return fmt.Sprintf("172.%d.%d.%d", r.between(16, 31), r.intn(256), r.between(1, 254))
	}
	first := r.between(1, 223)
	for first == 10 || first == 127 || first == 172 || first == 192 {
		first = r.between(1, 223)
	}
	return fmt.Sprintf("%d.%d.%d.%d", first, r.intn(256), r.intn(256), r.between(1, 254))
}

var (
	latinFirst = []string{"ivan", "anna", "dmitry", "olga", "aigerim", "nurlan", "john", "maria", "serik", "dana", "alex", "elena", "timur", "saule", "peter", "kate"}
	latinLast  = []string{"petrov", "smirnova", "ivanov", "nurlanov", "akhmetova", "doe", "smith", "sokolov", "bekova", "kim", "li", "orlova", "zhumabaev"}
	domains    = []string{"mail.ru", "yandex.ru", "gmail.com", "company.kz", "halykbank.kz", "corp.example.com", "kaspi.kz", "bk.ru", "outlook.com", "university.edu.kz", "inbox.ru", "sub.domain.co.uk", "startup.io"}
)

func (r *rng) email() string {
	f, l := r.pick(latinFirst), r.pick(latinLast)
	var local string
	switch r.intn(7) {
	case 0:
		local = f + "." + l
	case 1:
		local = f[:1] + "." + l
	case 2:
		local = f + "_" + l + strconv.Itoa(r.between(70, 99))
	case 3:
		local = f + "+" + r.pick([]string{"news", "work", "kz", "test"})
	case 4:
		local = l + "-" + f
	case 5:
		local = r.pick([]string{"support", "sales", "info", "hr", "noreply", "billing"})
	default:
		local = f + l
	}
	if r.intn(12) == 0 {
		return r.pick([]string{"иван", "анна", "ольга"}) + "@" + r.pick([]string{"почта.рф", "пример.рф"})
	}
	return local + "@" + r.pick(domains)
}

// ---- the corpus ----

type corpusLine struct{ category, text string }

func generateCorpus() []corpusLine {
	r := &rng{s: 19}
	var out []corpusLine
	add := func(cat, text string) { out = append(out, corpusLine{cat, text}) }

	// E-mail.
	emailT := []string{
		"Напишите мне на %s, пожалуйста.", "Contact: %s", "Мой email — %s", "Жазыңыз: %s, рахмет!",
		"cc: <%s>", "mailto:%s", `{"user": {"email": "%s", "active": true}}`, "Forwarded from %s on Monday",
		"Пошта: %s", "Send the invoice to %s and copy me.", "Почта для связи %s; отвечаю в течение дня.",
		"From: Ivan Petrov <%s>", "Reset link was sent to %s.",
	}
	for range 64 {
		add("pos-email", fill(r.pick(emailT), mark(Email, r.email())))
	}

	// Phones.
	phoneT := []string{
		"Позвоните по номеру %s после обеда.", "Call me at %s tomorrow.", "тел.: %s", "Менің нөмірім %s",
		"WhatsApp %s", "Контакт менеджера: %s (Алия)", "Phone: %s, ext. office", "номер клиента %s, перезвонить",
		"Если что — %s.", "Support line %s is open 24/7.", "Байланыс телефоны: %s",
	}
	for range 80 {
		add("pos-phone", fill(r.pick(phoneT), mark(Phone, r.phone())))
	}

	// Cards.
	cardT := []string{
		"Оплатил картой %s, но деньги не пришли.", "card number: %s, exp 09/27", "Картамның нөмірі %s",
		"Please refund to %s.", "Номер карты: %s", "My Visa is %s — is it blocked?", "Списание с карты %s на сумму 12 500 ₸",
		"PAN=%s", "Клиент продиктовал карту %s по телефону.",
	}
	for range 64 {
		d, s := r.cardNumber()
		add("pos-card", fill(r.pick(cardT), mark(Card, r.cardWritten(d, s))))
	}

	// IBAN.
	ibanT := []string{
		"Реквизиты: IBAN %s, БИК HSBKKZKX", "Please wire to %s by Friday.", "Шот нөмірі: %s",
		"Счёт %s в АО «Kaspi Bank»", "IBAN: %s", "Beneficiary account %s (EUR)", "Перевод на %s не прошёл.",
	}
	for range 56 {
		add("pos-iban", fill(r.pick(ibanT), mark(IBAN, r.ibanWritten(r.iban()))))
	}

	// Kazakh IIN and BIN.
	iinT := []string{
		"ИИН %s", "ЖСН: %s", "Клиент, ИИН %s, просит справку.", "my IIN is %s", "IIN: %s",
		"Анкета: Ахметова Д., %s, г. Алматы", "Заявитель (ИИН %s) не явился.",
	}
	binT := []string{"БИН организации %s", "ТОО «Астана Трейд», БИН %s", "BIN %s", "БСН: %s", "Контрагент %s, резидент"}
	for range 40 {
		add("pos-kz-iin", fill(r.pick(iinT), mark(KZIIN, r.kzIIN())))
	}
	for range 16 {
		add("pos-kz-bin", fill(r.pick(binT), mark(KZIIN, r.kzBIN())))
	}

	// Russian INN.
	inn12T := []string{"ИНН %s", "ИНН физлица: %s", "Индивидуальный предприниматель Сидоров, ИНН %s", "INN %s",
		"самозанятый, ИНН %s, чек приложен", "TIN: %s"}
	inn10T := []string{"ИНН %s", "ООО «Ромашка», ИНН %s, КПП 770101001", "ИНН/КПП %s/770101001", "INN: %s",
		"Контрагент: АО «Север» (ИНН %s)", "TIN %s, Russia"}
	innT := append(append([]string{}, inn12T...), inn10T...)
	for range 36 {
		add("pos-ru-inn12", fill(r.pick(inn12T), mark(RUINN, r.inn12())))
	}
	for range 26 {
		add("pos-ru-inn10", fill(r.pick(inn10T), mark(RUINN, r.inn10())))
	}

	// SNILS.
	snilsT := []string{"СНИЛС %s", "СНИЛС: %s, полис ОМС приложен", "страховой номер %s", "SNILS %s",
		"Сотрудник Петрова, СНИЛС %s, табельный 1043", "Прошу проверить СНИЛС %s в базе ПФР."}
	for range 56 {
		add("pos-ru-snils", fill(r.pick(snilsT), mark(RUSNILS, r.snilsWritten(r.snils()))))
	}

	// IPv4.
	ipT := []string{
		"сервер %s не отвечает", "curl http://%s:8080/health", "Connection refused from %s",
		"IP-адрес клиента: %s", `%s - - [10/Oct/2024:13:55:36 +0000] "GET /api HTTP/1.1" 200 512`,
		"ssh admin@%s -p 2222", "allow %s/32;", "Failed login from %s (3 attempts)", "upstream backend { server %s:9000; }",
		"DNS резолвит в %s", `{"remote_addr": "%s", "status": 502}`,
	}
	for range 64 {
		add("pos-ipv4", fill(r.pick(ipT), mark(IPv4, r.ipv4())))
	}

	// Several at once.
	for range 44 {
		switch r.intn(5) {
		case 0:
			add("pos-mixed", fmt.Sprintf("Клиент Иванов, ИНН %s, тел. %s, email %s", mark(RUINN, r.inn12()), mark(Phone, r.phone()), mark(Email, r.email())))
		case 1:
			d, s := r.cardNumber()
			add("pos-mixed", fmt.Sprintf("Customer %s paid with %s from %s.", mark(Email, r.email()), mark(Card, r.cardWritten(d, s)), mark(IPv4, r.ipv4())))
		case 2:
			add("pos-mixed", fmt.Sprintf("ИИН %s, IBAN %s, телефон %s", mark(KZIIN, r.kzIIN()), mark(IBAN, r.ibanWritten(r.iban())), mark(Phone, r.phone())))
		case 3:
			add("pos-mixed", fmt.Sprintf("Сотрудник: СНИЛС %s, ИНН %s, почта %s", mark(RUSNILS, r.snilsWritten(r.snils())), mark(RUINN, r.inn12()), mark(Email, r.email())))
		default:
			add("pos-mixed", fmt.Sprintf(`{"name":"Dana","phone":"%s","iin":"%s","ip":"%s"}`, mark(Phone, r.phone()), mark(KZIIN, r.kzIIN()), mark(IPv4, r.ipv4())))
		}
	}

	// Look-alikes that fail their checksums.
	for range 30 {
		d, s := r.cardNumber()
		add("neg-card-luhn", fill(r.pick(cardT), r.cardWritten(corrupt(r, d, 1+r.intn(3)), s)))
	}
	for range 24 {
		add("neg-iban-mod97", fill(r.pick(ibanT), r.ibanWritten(corrupt(r, r.iban(), 1+r.intn(5)))))
	}
	for range 24 {
		add("neg-kz-iin-check", fill(r.pick(iinT), corrupt(r, r.kzIIN(), 1)))
	}
	for range 24 {
		add("neg-ru-inn-check", fill(r.pick(innT), corrupt(r, r.pick([]string{r.inn12(), r.inn10()}), 1)))
	}
	for range 24 {
		add("neg-ru-snils-check", fill(r.pick(snilsT), r.snilsWritten(corrupt(r, r.snils(), 1+r.intn(2)))))
	}
	for _, s := range []string{"001-001-997 00", "001-001-998 01", "000-000-111 11", "001-000-001 05", "00100199800"} {
		add("neg-ru-snils-small", "СНИЛС "+s)
	}
	for range 8 {
		// A Kazakh IIN-shaped number with an impossible date (and a check digit computed for it).
		first := fmt.Sprintf("%02d%02d%02d%d%s", r.intn(100), r.between(13, 99), r.between(1, 28), r.between(3, 6), r.digits(4))
		if s := genKZ(first); s != "" {
			add("neg-kz-iin-date", "ИИН "+s)
		}
	}

	// Numbers that are not PII.
	for range 20 {
		add("neg-order", fill(r.pick([]string{"Заказ №%s от 12.03.2024", "Order #A-%s shipped", "номер заказа 2024-%s",
			"Invoice INV-%s is overdue", "Тапсырыс нөмірі: %s", "Ticket %s closed"}), r.digits(r.between(5, 9))))
	}
	for range 16 {
		add("neg-random-id", fill(r.pick([]string{"ID записи: %s", "Номер транзакции %s", "trace_id=%s", "Транзакция %s проведена",
			"request %s timed out", "SELECT * FROM orders WHERE id = %s;"}), r.digits(r.pick2(12, 16))))
	}
	for range 16 {
		add("neg-date", r.pick([]string{
			"Встреча 12.03.2024 в 10:30", "Deadline: 2024-03-12T10:15:30Z", "Дата рождения 03/12/1985",
			"с 01.01.2025 по 31.12.2025", "12 марта 2024 г.", "2024-03-12 14:05:59.123", "Q3 2024, week 37",
			"Период: 2023.01.01–2023.12.31", "Created at 1718000000000 ms", "timestamp 1718000000",
			fmt.Sprintf("%02d.%02d.%d %02d:%02d", r.between(1, 28), r.between(1, 12), r.between(1990, 2030), r.intn(24), r.intn(60)),
			fmt.Sprintf("%d-%02d-%02d", r.between(1990, 2030), r.between(1, 12), r.between(1, 28)),
		}))
	}
	for range 16 {
		add("neg-price", r.pick([]string{
			"Итого: 1 234 567 ₸", "Цена 12 500,00 руб.", "Total $1,299.99", "€ 2.499,00 inkl. MwSt.",
			"цена 45 990 тг", "Бюджет проекта — 150 000 000 тенге", "Revenue grew to 4,500,000,000 USD",
			fmt.Sprintf("Стоимость %d %03d ₸", r.between(1, 999), r.intn(1000)),
			fmt.Sprintf("Amount: %d.%02d EUR", r.between(1, 99999), r.intn(100)),
			"Сумма 8 500 000 тенге перечислена", "1 000 000 000 000 долларов",
		}))
	}
	for range 10 {
		add("neg-time", r.pick([]string{"Работаем с 9:00 до 18:00", "uptime 23:59:59", "Elapsed 00:01:32.450",
			"Поезд в 07:45, прибытие 13:20", fmt.Sprintf("%02d:%02d:%02d", r.intn(24), r.intn(60), r.intn(60))}))
	}
	for range 22 {
		add("neg-version", r.pick([]string{
			"Обновите до v1.2.3", "Go 1.26.0 released", "Chrome/120.0.6099.109 Safari/537.36", "version 2.0.0.1",
			"build 10.0.19045.3693", "kubectl 1.31.2", "protocol 1.2.3.4.5", "OID 1.3.6.1.4.1.2620.1.1",
			"Версия 4.2.0.15 содержит исправления", "Windows 10.0.19045", "Python 3.12.4", "dependency foo@1.4.2",
			"npm install lodash@4.17.21", "библиотека v2.10.3.1 устарела", "release-1.2.3.4", "Section 3.2.1.4.5",
			fmt.Sprintf("v%d.%d.%d.%d", r.intn(10), r.intn(20), r.intn(100), r.intn(1000)),
		}))
	}
	for range 26 {
		add("neg-code", r.pick([]string{
			"for i := 0; i < 1000000; i++ {", "const maxRetries = 3", "x = 0x7fffffff", "port: 8080",
			`"timeout": 30000, "retries": 5`, "SELECT count(*) FROM users WHERE age > 18;", "int64 max = 9223372036854775807",
			"assert.Equal(t, 4294967295, got)", "hash: sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			"@Override public int hashCode() { return 31 * id; }", "git clone git@github.com:switchyard-io/switchyard.git",
			"<img src=\"icon@2x.png\">", "user@localhost", "matrix[12][34] = 56;", "arr := []int{1, 2, 3, 4}",
			"chmod 0755 run.sh", "ulimit -n 65535", "export PATH=/usr/local/go/bin:$PATH", "LISTEN 0.0.0.0:443",
			"127.0.0.1 localhost", "netmask 255.255.255.0", "EXPOSE 8080/tcp", "resources: {limits: {memory: 512Mi}}",
			"dd if=/dev/zero of=file bs=1048576 count=1024", "@username, посмотри PR #4521",
		}))
	}
	for range 12 {
		add("neg-uuid", fill(r.pick([]string{"request_id=%s", "Идентификатор сессии %s", "uuid: %s"}),
			r.hex(8)+"-"+r.hex(4)+"-4"+r.hex(3)+"-a"+r.hex(3)+"-"+r.hex(12)))
	}
	for range 16 {
		add("neg-tracking", r.pick([]string{
			"UPS 1Z" + r.upperAlnum(16), "Трек-номер RR" + r.digits(9) + "KZ", "USPS 9400 " + group(r.digits(18), " ", 4),
			"DHL JD01" + r.digits(16), "Казпочта CP" + r.digits(9) + "KZ", "FedEx tracking " + r.digits(12),
			"СДЭК " + r.digits(10), "Накладная № " + r.digits(8),
		}))
	}
	for range 22 {
		add("neg-phone-like", r.pick([]string{
			"SKU 123-45-6789", "ISBN 978-5-17-118366-1", "ГОСТ 34.601-90", "ОКПО 12345678", "КПП 773601001",
			"ОГРН 1027700132195", "БИК 044525225", "р/с 40702810938000012345", "к/с 30101810400000000225",
			"Артикул 12-345-678", "Серия паспорта 45 12 №345678", "Код подразделения 770-001",
			"Population 19 500 000", "2^31 = 2147483648", "π ≈ 3.14159265358979", "Координаты 51.1694, 71.4491",
			"Табельный номер 000123", "ОКВЭД 62.01", "Лицевой счёт 1234567890", "Штрихкод 4607001771234",
			"Part no. 5500-0000-0000", "КБК 18210102010011000110",
		}))
	}
	for range 16 {
		// EAN-13 barcodes of Russian and Kazakh goods: 13 digits starting with 4, a check digit of their own.
		add("neg-ean13", fill(r.pick([]string{"Штрихкод %s", "EAN %s", "Товар: молоко 3,2%, штрихкод %s", "barcode=%s"}),
			genEAN13(r.pick([]string{"460", "461", "462", "463", "464", "465", "466", "467", "468", "469", "487", "400", "401", "590"})+r.digits(9))))
	}
	for range 8 {
		add("neg-email-like", r.pick([]string{"@username in the chat", "name at domain dot com", "user@localhost:5432",
			"email: ivan(at)mail.ru", "git@gitlab.com:group/project.git", "logo@3x.png", "see @Override docs", "a@b"}))
	}
	for range 30 {
		add("neg-prose", r.pick([]string{
			"Привет! Помоги составить письмо клиенту о задержке поставки.", "Summarize the attached meeting notes in three bullet points.",
			"Сәлеметсіз бе! Маған есеп жазуға көмектесіңізші.", "Переведи на английский: «Договор вступает в силу с момента подписания».",
			"What is the capital of Kazakhstan?", "В 2023 году выручка выросла на 15%, а расходы — на 7%.",
			"Top 10 reasons to use Go in 2025", "Глава 3, параграф 12: обязанности сторон.", "Room 404 is on the 4th floor.",
			"Скидка 20% до 31 декабря.", "The model scored 87.5 on MMLU and 92.1 on GSM8K.", "Ответь коротко: да или нет?",
		}))
	}

	// Known limits, labelled as what they are: the detectors miss them by design.
	for range 4 {
		add("limit-phone-bare", fill(r.pick([]string{"Мой номер %s", "звони %s"}), mark(Phone, "8"+r.pick([]string{"701", "777", "916", "926"})+r.digits(7))))
	}
	for range 4 {
		add("limit-inn10-nokeyword", "Контрагент АО «Север», "+mark(RUINN, r.inn10())+", Москва")
	}
	for range 2 {
		add("limit-iban-lower", "iban "+mark(IBAN, strings.ToLower(r.iban())))
	}
	add("limit-ipv4-range", "DHCP pool "+mark(IPv4, "10.0.0.100")+"-"+mark(IPv4, "10.0.0.200"))
	add("limit-email-quoted", `Write to `+mark(Email, `"john smith"@example.com`))
	return out
}

// pick2 returns a or b.
func (r *rng) pick2(a, b int) int {
	if r.intn(2) == 0 {
		return a
	}
	return b
}

func corpusFile() string {
	var b strings.Builder
	b.WriteString("# Generated by corpus_gen_test.go (go test -run TestCorpusFileIsGenerated -update ./internal/pii); do not edit.\n")
	b.WriteString("# category<TAB>text; {{detector:value}} marks an expected match.\n")
	for _, l := range generateCorpus() {
		b.WriteString(l.category + "\t" + l.text + "\n")
	}
	return b.String()
}
