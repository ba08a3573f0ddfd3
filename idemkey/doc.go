// Package idemkey derives idempotency keys from tool calls, as section 2 of the
// toolexec contract defines them:
//
//	key = lowercase hex SHA-256 of canonical({"tenant": T, "run_id": R, "tool": N,
//	                                          "arguments": {name: value, ...}})
//
// where canonical is package canonical's RFC 8785 form (NFC strings, exact numbers)
// and the arguments are the tool's key arguments, taken from the call.
//
// Which arguments count: a nil list means every argument the call sent; an empty,
// non-nil list means none (the key is tenant, run and tool alone); otherwise the named
// ones, in any order, duplicates ignored, names compared after NFC. A key argument the
// call did not send at all (absent, not null) makes the key underivable:
// [ErrUnderivable]. The call id is deliberately not part of the key.
//
// A dispatcher validates the arguments once with [Parse], which checks the whole
// object (every member, however deep) and keeps the canonical bytes of each member;
// [Arguments.Key] and [Arguments.CheckDigest] then only pick members and hash. [Derive]
// does both in one call. [Code] maps any error of this package to the stable code
// string that clients and rejection events carry.
//
// The arguments object may nest at most [MaxDepth] deep, one level less than
// canonical.MaxDepth, so that the envelope around it is itself within the canonical
// limit.
package idemkey
