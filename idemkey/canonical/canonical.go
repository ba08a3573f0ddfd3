package canonical

import "sync"

// MaxDepth is how deeply arrays and objects may nest: a document with MaxDepth
// containers one inside the other is accepted, one more is refused with [ErrTooDeep].
// The top-level container counts as one.
const MaxDepth = 128

// Limits bound what a document may expand to once parsed, so that a small text
// cannot make a large value: a megabyte of JSON can hold half a million values,
// each costing far more memory decoded than its few bytes of text. A zero field
// takes its default: Depth [MaxDepth] (also the most it may be), the others no
// bound. Exceeding Depth is [ErrTooDeep]; exceeding any other,
// [ErrTooManyValues].
type Limits struct {
	// Depth is how deeply arrays and objects may nest, the top-level container
	// counting as one.
	Depth int
	// Members is the most members one object may have.
	Members int
	// Elements is the most elements one array may have.
	Elements int
	// Values is the most values the whole document may hold: every member's
	// value and every element, containers included, and the document itself.
	Values int
}

// depth returns l.Depth within (0, MaxDepth].
func (l Limits) depth() int {
	if l.Depth <= 0 || l.Depth > MaxDepth {
		return MaxDepth
	}
	return l.Depth
}

// maxPooled caps the scratch capacity an encoder keeps between uses, so that one huge
// document does not pin its buffers in the pool.
const maxPooled = 64 << 10

var encoders = sync.Pool{New: func() any { return new(encoder) }}

func getEncoder(raw []byte, lim Limits) *encoder {
	e := encoders.Get().(*encoder)
	e.raw = raw
	e.pos = 0
	e.depth = 0
	e.maxDepth = lim.depth()
	e.lim = lim
	e.values = 0
	e.keepTop = false
	e.decode = false
	e.vals = e.vals[:0]
	e.members = e.members[:0]
	e.names = e.names[:0]
	return e
}

func putEncoder(e *encoder) {
	e.raw = nil
	e.out = nil
	if cap(e.own) > maxPooled {
		e.own = nil
	}
	if cap(e.names) > maxPooled {
		e.names = nil
	}
	if cap(e.str) > maxPooled {
		e.str = nil
	}
	if cap(e.nfc) > maxPooled {
		e.nfc = nil
	}
	if cap(e.reorder) > maxPooled {
		e.reorder = nil
	}
	if cap(e.members) > maxPooled/64 {
		e.members = nil
	}
	clear(e.vals[:cap(e.vals)])
	if cap(e.vals) > maxPooled/64 {
		e.vals = nil
	}
	encoders.Put(e)
}

// Canonicalize returns the canonical form of the JSON document raw. It returns an
// [*Error] (matching one of ErrSyntax, ErrDuplicateMember, ErrNFCCollision,
// ErrNumberOutOfRange, ErrInvalidUnicode, ErrTooDeep) when raw has none.
func Canonicalize(raw []byte) ([]byte, error) {
	e := getEncoder(raw, Limits{})
	defer putEncoder(e)
	e.out = e.own[:0]
	err := e.document()
	e.own = e.out[:0]
	if err != nil {
		return nil, err
	}
	out := make([]byte, len(e.out))
	copy(out, e.out)
	return out, nil
}

// AppendCanonical appends the canonical form of the JSON document raw to dst and
// returns the extended slice. dst must not overlap raw. On error it returns dst with
// its original length and an [*Error], as [Canonicalize] does; bytes beyond that
// length may have been written.
func AppendCanonical(dst, raw []byte) ([]byte, error) {
	e := getEncoder(raw, Limits{})
	defer putEncoder(e)
	n := len(dst)
	e.out = dst
	if err := e.document(); err != nil {
		return e.out[:n], err
	}
	return e.out, nil
}

// Valid reports whether raw has a canonical form.
func Valid(raw []byte) bool {
	e := getEncoder(raw, Limits{})
	defer putEncoder(e)
	e.out = e.own[:0]
	err := e.document()
	e.own = e.out[:0]
	return err == nil
}
