package redisstore

import "github.com/redis/go-redis/v9"

// The Lua scripts below are the store's only writers. Each runs atomically on the
// Redis primary that owns the tenant's hash slot, reads the clock with TIME (so every
// lease deadline is Redis server time), and touches only keys passed in KEYS, all of
// which share the tenant's hash tag.
//
// A record is one string value (see record.go for the layout); a write replaces it
// with SET … PX, which also restarts its retention. Every writing script takes the
// same leading keys and arguments:
//
//	KEYS[1] record        <prefix>:{<tenant>}:<digest>
//	KEYS[2] tenant index  <prefix>:{<tenant>}:idx  (sorted set: digest -> indexed-until ms)
//	KEYS[3] revision seq  <prefix>:{<tenant>}:rev  (string counter)
//	ARGV[1] retention in milliseconds
//	ARGV[2] the index slack in milliseconds (see indexSlack)
//
// Replies are strings starting with a status word (see the status* constants),
// for some followed by " <Redis time in ms> <rest>".

// Status words that start a script's reply.
const (
	statusOK        = "ok"        // the operation was applied
	statusExists    = "exists"    // claim: a live record is already there
	statusGone      = "gone"      // no live record
	statusNotHolder = "notholder" // the lease does not match the record
	statusChanged   = "changed"   // take over: revision or holder differ from seen
	statusHeld      = "held"      // take over: the lease has not run out
	statusNotIndet  = "notindet"  // resolve: the record is not indeterminate
)

// The record scripts are assembled from the Lua snippets below, pasted in rather
// than defined as Lua functions: Redis runs a script's body afresh on every call,
// so every function a script defines is a new closure each time, and a dozen of
// them cost Redis more than two commands do. Each snippet says which locals it
// reads and which it sets.

// luaLoad sets rec (KEYS[1]), fmt (string.format), HEAD (the header's format,
// see record.go) and v: the record's value, or false when there is none. A
// record the previous version stored, as a hash, is rendered in this layout
// without being written; its waiter flag is set, since that version's waiters
// never flag a record, so that every write to it publishes.
const luaLoad = `
local rec = KEYS[1]
local fmt = string.format
local HEAD = '2%s%s%s %d %d %d %d %d %d %d %d %d\n'
local v = redis.pcall('GET', rec)
if type(v) == 'table' then -- WRONGTYPE: the previous layout
  local h = redis.call('HGETALL', rec)
  local f = {}
  for i = 1, #h, 2 do f[h[i]] = h[i + 1] end
  local st = ({claimed = 'c', completed = 'd', indeterminate = 'i'})[f.state]
  if not st then error('redisstore: record ' .. rec .. ' in unknown state') end
  local tail = ''
  if st == 'd' then tail = f.outcome or '' elseif st == 'i' then tail = f.reason or '' end
  local id = ''
  for _, k in ipairs({'holder', 'token', 'check_digest', 'tool', 'run_id', 'call_id'}) do
    local s = f[k] or ''
    id = id .. #s .. ':' .. s
  end
  v = fmt(HEAD, 'w', st, f.body_entered or '0', f.rev, f.rev, f.lease_ms or 0,
    f.lease_until or 0, f.created or 0, f.updated or 0, f.expires or 0, f.expires or 0, #id) .. id .. tail
end
`

// luaNow sets now, Redis's time in ms, and us, its microseconds within the
// second.
const luaNow = `
local t = redis.call('TIME')
local us = tonumber(t[2])
local now = tonumber(t[1]) * 1000 + math.floor(us / 1000)
`

// luaWriter sets what the writing scripts share: idx and ctr (KEYS[2], KEYS[3]),
// ret and slack (ARGV[1], ARGV[2]), and keep, how far past a write its index
// entry reaches.
const luaWriter = `
local idx, ctr = KEYS[2], KEYS[3]
local ret, slack = tonumber(ARGV[1]), tonumber(ARGV[2])
local keep = ret + slack
`

// luaParse splits v: it sets w (waiter flag), st (state), be (body entered),
// rev, top (highest reserved revision), lms (lease ms), lu (lease deadline), cr
// (created), iu (indexed until), n (identity length) and pos (where the
// identity starts).
const luaParse = `
local w, st, be, rev, top, lms, lu, cr, iu, n, pos = string.match(v,
  '^2(.)(.)(.) (%d+) (%d+) (%d+) (%d+) (%d+) %d+ %d+ (%d+) (%d+)\n()')
if not w then error('redisstore: malformed record ' .. rec) end
rev, top, iu, n = tonumber(rev), tonumber(top), tonumber(iu), tonumber(n)
`

// luaNextRev moves rev and top on to the revision of this write, reading now,
// ctr, keep and slack. Revisions come from the tenant's counter two at a time:
// one for the write that takes them, one kept (top) for the record's next write
// (the record that completes a claim). A counter that is gone (expired, or never
// made) restarts at the server's time in ms times 1000, so that revisions keep
// growing across its loss.
const luaNextRev = `
if rev < top then
  rev = rev + 1
else
  local r = redis.call('INCRBY', ctr, 2)
  if r == 2 then
    r = math.max(now * 1000, rev + 1) + 1
    redis.call('SET', ctr, fmt('%d', r), 'PX', fmt('%d', keep + slack))
  elseif r <= rev + 1 then -- behind this record: never the case for counters this store keeps
    r = rev + 2
    redis.call('SET', ctr, fmt('%d', r), 'KEEPTTL')
  end
  rev, top = r - 1, r
end
`

// luaWrite stores the record — st, be, rev, top, lms, lu, cr, now, iu, id (the
// identity) and tail (outcome or reason) — with retention counted from now, and
// sets out to the stored value. The index entry's score, and the index's and
// counter's TTLs, cover the record until iu; only a write that would outlive iu
// (or a claim, with iu 0) moves the entry, to now plus keep. The TTLs are checked
// then, with one PTTL, and when the index's has fallen below keep (or it was
// just made, with none) both are pushed a slack further: once a slack, not once
// a claim. A longer TTL (stores sharing a prefix may be configured with different
// retentions) is never shortened, and the counter, which may have been made
// since, outlives the index.
const luaWrite = `
local exp = now + ret
if exp > iu then
  iu = now + keep
  redis.call('ZADD', idx, fmt('%d', iu), string.sub(rec, -64))
  if redis.call('PTTL', idx) < keep then
    redis.call('PEXPIRE', idx, fmt('%d', keep + slack))
    redis.call('PEXPIRE', ctr, fmt('%d', keep + slack), 'GT')
  end
end
local out = fmt(HEAD, '-', st, be, rev, top, lms, lu, cr, now, exp, iu, #id) .. id .. tail
redis.call('SET', rec, out, 'PX', ARGV[1])
`

// luaNotify announces the write of revision rev on the record's channel if a
// waiter flagged the record (w).
const luaNotify = `
if w == 'w' then redis.call('PUBLISH', rec .. ':chg', fmt('%d', rev)) end
`

// claimScript creates the record if no live one exists and answers
// "ok <now> <revision>"; otherwise it answers "exists <now> <value>" with the
// record as stored. It never publishes: waiters only wait on claims that exist.
// About one claim in sixteen (picked by the microseconds of Redis's clock, which
// no workload keeps in step with) also drops the index entries that no longer
// cover a record (with 1 s of slack), so that pruning costs the others nothing.
//
//	ARGV[3] lease ms  ARGV[4] identity (see encodeIdentity)
var claimScript = redis.NewScript(luaLoad + luaNow + `
if v then return 'exists ' .. fmt('%d', now) .. ' ' .. v end
` + luaWriter + `
local rev, top, iu = 0, 0, 0
` + luaNextRev + `
local lease = tonumber(ARGV[3])
local st, be, lms, lu, cr, id, tail = 'c', '0', lease, now + lease, now, ARGV[4], ''
` + luaWrite + `
if us % 16 == 0 then redis.call('ZREMRANGEBYSCORE', idx, '-inf', fmt('%d', now - 1000)) end
return 'ok ' .. fmt('%d', now) .. ' ' .. fmt('%d', rev)
`)

// readScript answers "ok <now> <value>", or "gone <now>", so that a caller can
// judge the lease by Redis's clock. It writes nothing.
var readScript = redis.NewScript(luaLoad + luaNow + `
if not v then return 'gone ' .. fmt('%d', now) end
return 'ok ' .. fmt('%d', now) .. ' ' .. v
`)

// watchScript is readScript for a waiter that saw the record at revision
// ARGV[1]: while the record is still at that revision (the waiter goes on
// waiting) it also sets the record's waiter flag, in place and keeping the TTL,
// so that the next write publishes on the record's channel. The waiter
// subscribes before it runs this, and Redis runs scripts one at a time, so a
// write either came before this read or sees the flag.
var watchScript = redis.NewScript(luaLoad + luaNow + `
if not v then return 'gone ' .. fmt('%d', now) end
local w, rev = string.match(v, '^2(.).. (%d+) ')
if w ~= 'w' and rev == ARGV[1] then redis.call('SETRANGE', rec, 1, 'w') end
return 'ok ' .. fmt('%d', now) .. ' ' .. v
`)

// luaHolder starts the holder-only scripts: it loads and parses the record and
// checks that the lease (ARGV[3], its holder and token as encodeLeaseID writes
// them) holds its claim, answering a status word otherwise.
const luaHolder = luaLoad + luaWriter + `
if not v then return 'gone' end
` + luaParse + `
if st ~= 'c' or string.sub(v, pos, pos + #ARGV[3] - 1) ~= ARGV[3] then return 'notholder' end
`

// recordScript completes the claim with an outcome.
//
//	ARGV[3] lease  ARGV[4] outcome
var recordScript = redis.NewScript(luaHolder + luaNow + luaNextRev + `
st, be = 'd', '0'
local id, tail = string.sub(v, pos, pos + n - 1), ARGV[4]
` + luaWrite + luaNotify + `
return 'ok'
`)

// indeterminateScript parks the claim as indeterminate.
//
//	ARGV[3] lease  ARGV[4] reason  ARGV[5] body entered ("1"/"0")
var indeterminateScript = redis.NewScript(luaHolder + luaNow + luaNextRev + `
st, be = 'i', ARGV[5]
local id, tail = string.sub(v, pos, pos + n - 1), ARGV[4]
` + luaWrite + luaNotify + `
return 'ok'
`)

// renewScript moves the lease deadline to the server's now plus ARGV[4] ms.
//
//	ARGV[3] lease  ARGV[4] lease ms
var renewScript = redis.NewScript(luaHolder + luaNow + luaNextRev + `
lms = tonumber(ARGV[4])
lu = now + lms
local id, tail = string.sub(v, pos, pos + n - 1), ''
` + luaWrite + luaNotify + `
return 'ok'
`)

// releaseScript drops the claim.
//
//	ARGV[3] lease
var releaseScript = redis.NewScript(luaHolder + `
redis.call('UNLINK', rec)
redis.call('ZREM', idx, string.sub(rec, -64))
if w == 'w' then redis.call('PUBLISH', rec .. ':chg', 'gone') end
return 'ok'
`)

// withdrawScript drops a claim, whatever its lease, provided its revision and
// holder are still the ones the caller saw.
//
//	ARGV[3] holder (length-prefixed, as in the identity)  ARGV[4] seen revision
var withdrawScript = redis.NewScript(luaLoad + luaWriter + `
if not v then return 'gone' end
` + luaParse + `
if st ~= 'c' or rev ~= tonumber(ARGV[4]) or string.sub(v, pos, pos + #ARGV[3] - 1) ~= ARGV[3] then
  return 'notholder'
end
redis.call('UNLINK', rec)
redis.call('ZREM', idx, string.sub(rec, -64))
if w == 'w' then redis.call('PUBLISH', rec .. ':chg', 'gone') end
return 'ok'
`)

// takeOverScript replaces a claim whose lease has run out by the server's clock,
// provided its revision and holder are still the ones the caller saw. The new
// claim keeps the record's creation time and drops any outcome.
//
//	ARGV[3] seen holder (length-prefixed, as in the identity)  ARGV[4] seen revision
//	ARGV[5] lease ms  ARGV[6] the new claim's identity
var takeOverScript = redis.NewScript(luaLoad + luaWriter + `
if not v then return 'gone' end
` + luaParse + `
if st ~= 'c' or rev ~= tonumber(ARGV[4]) or string.sub(v, pos, pos + #ARGV[3] - 1) ~= ARGV[3] then
  return 'changed'
end
` + luaNow + `
if now < tonumber(lu) then return 'held' end
` + luaNextRev + `
be, lms = '0', tonumber(ARGV[5])
lu = now + lms
local id, tail = ARGV[6], ''
` + luaWrite + luaNotify + `
return 'ok'
`)

// resolveScript applies an operator's decision to an indeterminate record:
// release (ARGV[3] = "1") or complete with outcome ARGV[4]. It answers
// "ok <now> <value>" with the record as it now is, or as it was for a release.
var resolveScript = redis.NewScript(luaLoad + luaWriter + `
if not v then return 'gone' end
` + luaParse + `
if st ~= 'i' then return 'notindet' end
` + luaNow + `
if ARGV[3] == '1' then
  redis.call('UNLINK', rec)
  redis.call('ZREM', idx, string.sub(rec, -64))
  if w == 'w' then redis.call('PUBLISH', rec .. ':chg', 'gone') end
  return 'ok ' .. fmt('%d', now) .. ' ' .. v
end
` + luaNextRev + `
st, be = 'd', '0'
local id, tail = string.sub(v, pos, pos + n - 1), ARGV[4]
` + luaWrite + luaNotify + `
return 'ok ' .. fmt('%d', now) .. ' ' .. out
`)

// forgetScript removes one batch of a tenant's records.
//
//	KEYS[1] tenant index  KEYS[2..n] record keys
//	ARGV[1..n-1] the digests of KEYS[2..n], in order
//
// It returns how many records existed and were removed; each removal is published
// on the record's channel (named after the record key) so that waiters learn of it.
var forgetScript = redis.NewScript(`
local n = 0
for i = 2, #KEYS do
  if redis.call('UNLINK', KEYS[i]) == 1 then
    n = n + 1
    redis.call('PUBLISH', KEYS[i] .. ':chg', 'gone')
  end
  redis.call('ZREM', KEYS[1], ARGV[i - 1])
end
return n
`)
