package pii

// The checksum functions take only the digits (and letters, for IBAN) of a candidate, separators
// already removed; they never allocate.

// luhn reports whether the ASCII digits d pass the Luhn check (ISO/IEC 7812-1).
func luhn(d []byte) bool {
	sum := 0
	double := false
	for i := len(d) - 1; i >= 0; i-- {
		v := int(d[i] - '0')
		if double {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
		double = !double
	}
	return sum%10 == 0
}

// ibanMod97 reports whether the compact IBAN s (upper-case letters and digits) has s mod 97 == 1
// after moving its first four characters to the end and writing each letter as 10..35 (ISO 13616).
func ibanMod97(s []byte) bool {
	if len(s) < 5 {
		return false
	}
	r := 0
	add := func(c byte) {
		switch {
		case c >= '0' && c <= '9':
			r = (r*10 + int(c-'0')) % 97
		default: // 'A'..'Z', two decimal digits
			r = (r*100 + int(c-'A') + 10) % 97
		}
	}
	for _, c := range s[4:] {
		add(c)
	}
	for _, c := range s[:4] {
		add(c)
	}
	return r == 1
}

// kzCheckDigit is the check digit of a Kazakh IIN or BIN from its first 11 digits: the sum of the
// digits weighted 1..11, mod 11; if that is 10, the sum weighted 3,4,...,11,1,2, mod 11; if that is
// 10 too the number is never issued (ok false).
func kzCheckDigit(d []byte) (c int, ok bool) {
	s := 0
	for i := range 11 {
		s += int(d[i]-'0') * (i + 1)
	}
	if c = s % 11; c != 10 {
		return c, true
	}
	s = 0
	for i := range 11 {
		s += int(d[i]-'0') * ((i+2)%11 + 1) // 3,4,...,11,1,2
	}
	if c = s % 11; c != 10 {
		return c, true
	}
	return 0, false
}

// kzIIN reports whether the 12 digits d are a valid Kazakh IIN (individual) or BIN (legal entity):
// the check digit, and the structure of one or the other.
//
// IIN: YYMMDD date of birth, then the century-and-sex digit 1..6 (1,2: 1800s; 3,4: 1900s; 5,6:
// 2000s), four serial digits, the check digit. The date must exist in that century.
// BIN: YYMM of registration, the entity type 4 (resident), 5 (non-resident) or 6 (individual
// entrepreneur acting jointly), the division 0 (head office), 1 (branch), 2 (representative
// office) or 3 (peasant farm), five serial digits, the check digit.
func kzIIN(d []byte) bool {
	if len(d) != 12 {
		return false
	}
	c, ok := kzCheckDigit(d)
	if !ok || c != int(d[11]-'0') {
		return false
	}
	return kzIINDate(d) || kzBINShape(d)
}

func kzIINDate(d []byte) bool {
	yy := int(d[0]-'0')*10 + int(d[1]-'0')
	mm := int(d[2]-'0')*10 + int(d[3]-'0')
	dd := int(d[4]-'0')*10 + int(d[5]-'0')
	var year int
	switch d[6] {
	case '1', '2':
		year = 1800 + yy
	case '3', '4':
		year = 1900 + yy
	case '5', '6':
		year = 2000 + yy
	default:
		return false
	}
	return mm >= 1 && mm <= 12 && dd >= 1 && dd <= daysIn(year, mm)
}

func kzBINShape(d []byte) bool {
	mm := int(d[2]-'0')*10 + int(d[3]-'0')
	return mm >= 1 && mm <= 12 && d[4] >= '4' && d[4] <= '6' && d[5] >= '0' && d[5] <= '3'
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// innWeights10 and the rest are the Russian INN check digit weights (Federal Tax Service order
// ММВ-7-6/435@, appendix): a check digit is the weighted sum mod 11 mod 10.
var (
	innWeights10 = [...]int{2, 4, 10, 3, 5, 9, 4, 6, 8}
	innWeights11 = [...]int{7, 2, 4, 10, 3, 5, 9, 4, 6, 8}
	innWeights12 = [...]int{3, 7, 2, 4, 10, 3, 5, 9, 4, 6, 8}
)

func innDigit(d []byte, w []int) int {
	s := 0
	for i, wi := range w {
		s += int(d[i]-'0') * wi
	}
	return s % 11 % 10
}

// ruINN reports whether the 10 digits (organisation) or 12 digits (individual) d are a valid
// Russian INN: the region code (first two digits) is not 00 and the check digits match.
func ruINN(d []byte) bool {
	if len(d) < 2 || (d[0] == '0' && d[1] == '0') {
		return false
	}
	switch len(d) {
	case 10:
		return innDigit(d, innWeights10[:]) == int(d[9]-'0')
	case 12:
		return innDigit(d, innWeights11[:]) == int(d[10]-'0') &&
			innDigit(d, innWeights12[:]) == int(d[11]-'0')
	}
	return false
}

// snilsMinChecked is the largest SNILS number issued without a meaningful check sum
// (001-001-998): such numbers are not matched at all.
const snilsMinChecked = 1001998

// ruSNILS reports whether the 11 digits d are a valid Russian SNILS: the nine-digit number is above
// 001-001-998 and the last two digits are its check sum (digits weighted 9..1; a sum below 100 is the
// check number itself, 100 and 101 give 00, larger sums are taken mod 101, 100 again giving 00).
func ruSNILS(d []byte) bool {
	if len(d) != 11 {
		return false
	}
	n, s := 0, 0
	for i := range 9 {
		v := int(d[i] - '0')
		n = n*10 + v
		s += v * (9 - i)
	}
	if n <= snilsMinChecked {
		return false
	}
	switch {
	case s < 100:
	case s <= 101:
		s = 0
	default:
		if s %= 101; s == 100 {
			s = 0
		}
	}
	return s == int(d[9]-'0')*10+int(d[10]-'0')
}
