package canonical

import (
	"math"
	"strconv"
)

// maxExact is the number of integer digits the exact path writes: an integer below
// 10^21 has at most 21.
const maxExact = 21

// expCap bounds the exponents the encoder tracks. Beyond it every non-zero value is
// out of range anyway; the cap keeps the arithmetic from overflowing, however many
// exponent digits the input has.
const expCap = 1 << 40

// number encodes the number at e.pos.
//
// The value is split into its significant digits D (no leading or trailing zeros)
// and a power of ten, value = ±D × 10^scale. If scale >= 0 and D has at most 21 -
// scale digits, the value is an integer below 10^21 and is written exactly: D, then
// scale zeros. Otherwise it is rounded to a double and written as ECMAScript does.
// Values whose order of magnitude alone puts them beyond the doubles are refused
// before any conversion, so neither path ever expands an exponent.
func (e *encoder) number() error {
	start := e.pos
	raw := e.raw
	i := start
	neg := false
	if raw[i] == '-' {
		neg = true
		i++
	}
	intStart := i
	switch {
	case i >= len(raw) || raw[i] < '0' || raw[i] > '9':
		return e.syntax(i, "want a digit in the number")
	case raw[i] == '0':
		i++
		if i < len(raw) && '0' <= raw[i] && raw[i] <= '9' {
			return e.syntax(intStart, "leading zeros are not allowed in a number")
		}
	default:
		for i < len(raw) && '0' <= raw[i] && raw[i] <= '9' {
			i++
		}
	}
	intEnd := i
	fracStart, fracEnd := i, i
	if i < len(raw) && raw[i] == '.' {
		i++
		fracStart = i
		for i < len(raw) && '0' <= raw[i] && raw[i] <= '9' {
			i++
		}
		if i == fracStart {
			return e.syntax(i, "want a digit after the decimal point")
		}
		fracEnd = i
	}
	var exp int64
	if i < len(raw) && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		expNeg := false
		if i < len(raw) && (raw[i] == '+' || raw[i] == '-') {
			expNeg = raw[i] == '-'
			i++
		}
		digits := i
		for i < len(raw) && '0' <= raw[i] && raw[i] <= '9' {
			if exp < expCap {
				exp = exp*10 + int64(raw[i]-'0')
			}
			i++
		}
		if i == digits {
			return e.syntax(i, "want a digit in the exponent")
		}
		if expNeg {
			exp = -exp
		}
	}
	e.pos = i

	// The significant digits, across the decimal point: the digit string is
	// raw[intStart:intEnd] followed by raw[fracStart:fracEnd].
	nInt, nFrac := intEnd-intStart, fracEnd-fracStart
	digit := func(k int) byte {
		if k < nInt {
			return raw[intStart+k]
		}
		return raw[fracStart+k-nInt]
	}
	n := nInt + nFrac
	first := 0
	for first < n && digit(first) == '0' {
		first++
	}
	if first == n {
		e.out = append(e.out, '0') // every zero, -0 and 0e999999999 included
		return nil
	}
	last := n - 1
	for digit(last) == '0' {
		last--
	}
	sig := int64(last - first + 1)
	scale := exp - int64(nFrac) + int64(n-1-last)
	magnitude := sig + scale // value lies in [10^(magnitude-1), 10^magnitude)

	if scale >= 0 && magnitude <= maxExact {
		if neg {
			e.out = append(e.out, '-')
		}
		for k := first; k <= last; k++ {
			e.out = append(e.out, digit(k))
		}
		for range scale {
			e.out = append(e.out, '0')
		}
		return nil
	}

	// Beyond 10^309 no double is near; below 10^-324 every value rounds to zero
	// (the smallest double is about 4.9e-324).
	if magnitude-1 > 309 || magnitude < -324 {
		return e.outOfRange(start)
	}
	f, err := strconv.ParseFloat(string(raw[start:i]), 64)
	if err != nil || math.IsInf(f, 0) || f == 0 {
		return e.outOfRange(start)
	}
	e.out = appendES(e.out, f)
	return nil
}

func (e *encoder) outOfRange(start int) error {
	text := e.raw[start:e.pos]
	if len(text) > 40 {
		return newError(CodeNumberOutOfRange, start,
			"number %s… (%d bytes) does not fit a finite non-zero double", text[:32], len(text))
	}
	return newError(CodeNumberOutOfRange, start, "number %s does not fit a finite non-zero double", text)
}

// appendES appends the finite double f as ECMAScript's Number::toString writes it:
// the shortest digits that round-trip, in plain notation when the decimal exponent
// lies in [-6, 21), in exponent notation (1e+21, 1.5e-7) otherwise.
func appendES(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	var buf [32]byte
	b := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // -d.ddde±dd
	if b[0] == '-' {
		dst = append(dst, '-')
		b = b[1:]
	}
	var digits [24]byte
	k := 0
	j := 0
	for ; b[j] != 'e'; j++ {
		if b[j] != '.' {
			digits[k] = b[j]
			k++
		}
	}
	j++ // 'e'
	expNeg := b[j] == '-'
	j++
	x := 0
	for ; j < len(b); j++ {
		x = x*10 + int(b[j]-'0')
	}
	if expNeg {
		x = -x
	}
	d := digits[:k]
	n := x + 1 // the value is 0.d × 10^n
	switch {
	case k <= n && n <= 21:
		dst = append(dst, d...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, d[:n]...)
		dst = append(dst, '.')
		dst = append(dst, d[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, d...)
	default:
		dst = append(dst, d[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, d[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		} else {
			dst = append(dst, '-')
		}
		dst = strconv.AppendInt(dst, int64(abs(n-1)), 10)
	}
	return dst
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
