// Package pii finds personal data in prompt text, masks it with placeholders for the length of one
// request and puts the originals back into the answer, streamed or not (issue 19; a
// RoutingPolicy's spec.pii).
//
// It is pure: no I/O, no goroutines, no clock, no logging, and it never stores or reports a value
// anywhere but in the Session that masked it (Counts and Found carry detector names and numbers
// only). The proxy compiles a Scanner per config load and starts a Session per request.
//
// # Precision first
//
// A placeholder the model sees instead of an order number breaks the task at hand, so every
// detector prefers missing a value to inventing one:
//   - a match never starts or ends inside a word: the rune before and after is not a letter, digit,
//     mark or '_', and not a connector tied to a word ("ORD-4111...", "v1.2.3.4", "/id/7707083893");
//     a number never continues past its own separators ("4111 1111 1111 1111 2222" is one run and
//     not a card), nor past a decimal point or a colon and digits;
//   - card, iban, kz-iin, ru-inn and ru-snils must pass their checksums, and card its issuer
//     prefix for its length;
//   - a 10-digit ru-inn (one check digit: one random number in ten passes) needs an INN keyword
//     (ИНН, INN, TIN) in the 48 bytes before it;
//   - national phone numbers need separators; a bare run of digits is a phone only after '+'.
//
// # Detectors and their limits
//
// email: local@domain.tld, non-ASCII letters allowed; no quoted local parts, IP-literal domains,
// "user@localhost", scp paths ("git@host:repo") or "icon@2x.png".
//
// phone: E.164 ('+', 8-15 digits; +7 and +1 exactly 11) with spaces, dashes, dots and one
// parenthesised area code; Russian/Kazakh 8 (7xx) xxx-xx-xx and other 8-prefixed 11-digit forms;
// 10-digit national forms with a 3-digit area code (or 3-5 digits in parentheses) and the
// subscriber number in groups of 2-4 or one of 5-7: "(495) 123-45-67", "415-555-2671". Not
// matched: bare 8XXXXXXXXXX, 7-digit local numbers, extensions, numbers written with words.
// A '+' number followed by another group of digits may absorb it if the total stays within 15.
//
// card: 14-19 digits (13-digit numbers are EAN-13 barcodes far more often), in one run, in groups of four (one separator, space or dash, throughout), or
// 4-6-5 / 4-6-4; Luhn; a known issuer prefix for that length (see cardPrefixOK); not right after a
// label that calls it something else ("transaction", "order", "id", "заказ", ...; see idLabels)
// unless a card word precedes it. About one random 16-digit number in twenty-five passes prefix
// and Luhn (TestRandomNumberRates), so an unlabelled long order number can be masked as a card.
//
// iban: two upper-case letters of a registry country, the exact length of that country, in one
// run or in groups of four separated by single spaces, mod 97 == 1. Lower-case IBANs and national
// account numbers (a Russian 20-digit расчётный счёт) are not matched.
//
// kz-iin: 12 digits in one run, the official check digit (weights 1..11, then 3..11,1,2; a second
// 10 means never issued), and either an IIN's date of birth with its century digit 1-6 or a BIN's
// registration month, entity type 4-6 and division 0-3.
//
// ru-inn: 12 digits (individual, two check digits) or 10 digits (organisation, one, keyword
// needed), in one run, region not 00. A 12-digit number valid both as an IIN and an INN is an
// IIN unless only an INN keyword precedes it.
//
// ru-snils: XXX-XXX-XXX YY (dashes or spaces) or 11 digits in one run, with the check number;
// numbers up to 001-001-998, which have none, are never matched.
//
// ipv4: four decimal octets 0-255 without leading zeros, not part of a longer dotted run
// (1.2.3.4.5, OIDs), not after a version word ("version 1.0.0.1", "build 2.0.0.1"); ":port" and
// "/prefix" may follow. 0.x.x.x, 127.x.x.x and 255.x.x.x are never masked: unspecified,
// loopback and netmasks say nothing about anyone. Ranges written "a-b" are missed.
//
// Custom detectors are RE2 patterns compiled once, matched as written.
//
// # Placeholders
//
// [TYPE_n], n counting distinct values per detector within the session. Restore replaces exactly
// the placeholders the session issued; a StreamRestorer holds back at most one placeholder's
// length at the end of a piece, and only while it can still become one.
package pii
