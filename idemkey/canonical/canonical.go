package canonical

import "sync"

// MaxDepth is how deeply arrays and objects may nest: a document with MaxDepth
// containers one inside the other is accepted, one more is refused with [ErrTooDeep].
// The top-level container counts as one.
const MaxDepth = 128

// maxPooled caps the scratch capacity an encoder keeps between uses, so that one huge
// document does not pin its buffers in the pool.
const maxPooled = 64 << 10

var encoders = sync.Pool{New: func() any { return new(encoder) }}

func getEncoder(raw []byte, maxDepth int) *encoder {
	e := encoders.Get().(*encoder)
	e.raw = raw
	e.pos = 0
	e.depth = 0
	e.maxDepth = maxDepth
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
	e := getEncoder(raw, MaxDepth)
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
	e := getEncoder(raw, MaxDepth)
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
	e := getEncoder(raw, MaxDepth)
	defer putEncoder(e)
	e.out = e.own[:0]
	err := e.document()
	e.own = e.out[:0]
	return err == nil
}
