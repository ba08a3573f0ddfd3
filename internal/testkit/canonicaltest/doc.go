// Package canonicaltest generates JSON documents for property tests of package
// canonical and of the code built on it: random values, and random spellings of one
// value (member order, whitespace, escapes, NFC or NFD, number notation) that must
// all have the same canonical form.
package canonicaltest
