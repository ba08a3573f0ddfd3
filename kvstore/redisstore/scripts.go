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

// readPrelude holds the helpers every record script uses; the record is
// KEYS[1]. Numbers are written with string.format('%d') so that Redis stores
// plain decimal integers.
const readPrelude = `
local rec = KEYS[1]

local HEAD = '2%s%s%s %d %d %d %d %d %d %d %d %d\n'
local PARSE = '^2(.)(.)(.) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+)\n()'

local function num(n) return string.format('%d', n) end

-- now_ms returns Redis's time in ms, and its microseconds within the second.
local function now_ms()
  local t = redis.call('TIME')
  local us = tonumber(t[2])
  return tonumber(t[1]) * 1000 + math.floor(us / 1000), us
end

local function lp(s) return #s .. ':' .. s end

-- from_hash renders a record stored by the previous version (a hash) in this
-- version's layout, without writing it. Its waiter flag is set: that version's
-- waiters never register, so every write to such a record is announced.
local function from_hash()
  local h = redis.call('HGETALL', rec)
  local f = {}
  for i = 1, #h, 2 do f[h[i]] = h[i + 1] end
  local st = ({claimed = 'c', completed = 'd', indeterminate = 'i'})[f.state]
  if not st then error('redisstore: record ' .. rec .. ' in unknown state') end
  local tail = ''
  if st == 'd' then tail = f.outcome or '' elseif st == 'i' then tail = f.reason or '' end
  local id = lp(f.holder or '') .. lp(f.token or '') .. lp(f.check_digest or '') ..
    lp(f.tool or '') .. lp(f.run_id or '') .. lp(f.call_id or '')
  return string.format(HEAD, 'w', st, f.body_entered or '0', f.rev, f.rev,
    f.lease_ms or 0, f.lease_until or 0, f.created or 0, f.updated or 0,
    f.expires or 0, f.expires or 0, #id) .. id .. tail
end

-- load returns the record's value, or false when there is none.
local function load()
  local v = redis.pcall('GET', rec)
  if type(v) == 'table' then return from_hash() end -- WRONGTYPE: the previous layout
  return v
end

`

// prelude adds the helpers of the writing scripts to readPrelude.
const prelude = readPrelude + `
local idx, ctr = KEYS[2], KEYS[3]
local ret, slack = tonumber(ARGV[1]), tonumber(ARGV[2])
local keep = ret + slack -- how far past a write its index entry reaches

-- parse splits a value: waiter flag, state, body entered, revision, top reserved
-- revision, lease ms, lease deadline, created, updated, expires, indexed until,
-- identity length, and the identity's position.
local function parse(v)
  local w, st, be, rev, top, lms, lu, cr, up, ex, iu, n, pos = string.match(v, PARSE)
  if not w then error('redisstore: malformed record ' .. rec) end
  return w, st, be, tonumber(rev), tonumber(top), lms, lu, cr, up, ex, tonumber(iu), tonumber(n), pos
end

-- starts reports whether v holds prefix at position pos.
local function starts(v, pos, prefix)
  return string.sub(v, pos, pos + #prefix - 1) == prefix
end

-- cover makes the index and the counter live at least keep ms from now. When
-- the index's TTL has fallen below that (or it was just made, with none), both
-- are pushed a slack further, so that this happens once a slack, not once a
-- claim; a longer TTL (stores sharing a prefix may be configured with different
-- retentions) is never shortened. The counter, which may have been made since,
-- always outlives the index.
local function cover()
  if redis.call('PTTL', idx) < keep then
    redis.call('PEXPIRE', idx, num(keep + slack))
    redis.call('PEXPIRE', ctr, num(keep + slack), 'GT')
  end
end

-- next_rev returns the revision for a write to a record whose revision is old
-- and whose reserved revisions run up to top, and the new top. Revisions come
-- from the tenant's counter two at a time: one for the write that takes them,
-- one kept for the record's next write (the record that completes a claim). A
-- counter that is gone (expired, or never made) restarts at the server's time
-- in ms times 1000, so that revisions keep growing across its loss.
local function next_rev(old, top, now)
  if old < top then return old + 1, top end
  local r = redis.call('INCRBY', ctr, 2)
  if r == 2 then
    r = math.max(now * 1000, old + 1) + 1
    redis.call('SET', ctr, num(r), 'PX', num(keep + slack))
  elseif r <= old + 1 then -- behind this record: never the case for counters this store keeps
    r = old + 2
    redis.call('SET', ctr, num(r), 'KEEPTTL')
  end
  return r - 1, r
end

-- write stores the record, with retention counted from now. The index entry's
-- score, and the index's and counter's TTLs, cover the record until iu; only a
-- write that outlives iu (or a claim, with iu 0) moves them, to now plus keep.
-- It returns the stored value.
local function write(st, be, rev, top, lms, lu, cr, now, iu, id, tail)
  local exp = now + ret
  if exp > iu then
    iu = now + keep
    redis.call('ZADD', idx, num(iu), string.sub(rec, -64))
    cover()
  end
  local v = string.format(HEAD, '-', st, be, rev, top, lms, lu, cr, now, exp, iu, #id) .. id .. tail
  redis.call('SET', rec, v, 'PX', ARGV[1])
  return v
end

-- notify announces a write on the record's channel if a waiter flagged it (w).
local function notify(w, msg)
  if w == 'w' then redis.call('PUBLISH', rec .. ':chg', msg) end
end
`

// claimScript creates the record if no live one exists and answers
// "ok <now> <revision>"; otherwise it answers "exists <now> <value>" with the
// record as stored. It never publishes: waiters only wait on claims that exist.
// About one claim in sixteen (picked by the microseconds of Redis's clock, which
// no workload keeps in step with) also drops the index entries that no longer
// cover a record (with 1 s of slack), so that pruning costs the others nothing.
//
//	ARGV[3] lease ms  ARGV[4] identity (see encodeIdentity)
var claimScript = redis.NewScript(prelude + `
local v = load()
local now, us = now_ms()
if v then return 'exists ' .. num(now) .. ' ' .. v end
local rev, top = next_rev(0, 0, now)
local lease = tonumber(ARGV[3])
write('c', '0', rev, top, lease, now + lease, now, now, 0, ARGV[4], '')
if us % 16 == 0 then redis.call('ZREMRANGEBYSCORE', idx, '-inf', num(now - 1000)) end
return 'ok ' .. num(now) .. ' ' .. num(rev)
`)

// readScript answers "ok <now> <value>", or "gone <now>", so that a caller can
// judge the lease by Redis's clock. It writes nothing.
var readScript = redis.NewScript(readPrelude + `
local v = load()
local now = now_ms()
if not v then return 'gone ' .. num(now) end
return 'ok ' .. num(now) .. ' ' .. v
`)

// watchScript is readScript for a waiter that saw the record at revision
// ARGV[1]: while the record is still at that revision (the waiter goes on
// waiting) it also sets the record's waiter flag, in place and keeping the TTL,
// so that the next write publishes on the record's channel. The waiter
// subscribes before it runs this, and Redis runs scripts one at a time, so a
// write either came before this read or sees the flag.
var watchScript = redis.NewScript(readPrelude + `
local v = load()
local now = now_ms()
if not v then return 'gone ' .. num(now) end
local w, rev = string.match(v, '^2(.).. (%d+) ')
if w ~= 'w' and rev == ARGV[1] then redis.call('SETRANGE', rec, 1, 'w') end
return 'ok ' .. num(now) .. ' ' .. v
`)

// holderPrelude loads the record and checks that the lease (ARGV[3], its
// holder and token as encodeLeaseID writes them) holds its claim, returning a
// status word otherwise.
const holderPrelude = prelude + `
local v = load()
if not v then return 'gone' end
local w, st, be, rev, top, lms, lu, cr, _, _, iu, n, pos = parse(v)
if st ~= 'c' or not starts(v, pos, ARGV[3]) then return 'notholder' end
`

// recordScript completes the claim with an outcome.
//
//	ARGV[3] lease  ARGV[4] outcome
var recordScript = redis.NewScript(holderPrelude + `
local now = now_ms()
rev, top = next_rev(rev, top, now)
write('d', '0', rev, top, lms, lu, cr, now, iu, string.sub(v, pos, pos + n - 1), ARGV[4])
notify(w, num(rev))
return 'ok'
`)

// indeterminateScript parks the claim as indeterminate.
//
//	ARGV[3] lease  ARGV[4] reason  ARGV[5] body entered ("1"/"0")
var indeterminateScript = redis.NewScript(holderPrelude + `
local now = now_ms()
rev, top = next_rev(rev, top, now)
write('i', ARGV[5], rev, top, lms, lu, cr, now, iu, string.sub(v, pos, pos + n - 1), ARGV[4])
notify(w, num(rev))
return 'ok'
`)

// renewScript moves the lease deadline to the server's now plus ARGV[4] ms.
//
//	ARGV[3] lease  ARGV[4] lease ms
var renewScript = redis.NewScript(holderPrelude + `
local now = now_ms()
local lease = tonumber(ARGV[4])
rev, top = next_rev(rev, top, now)
write('c', be, rev, top, lease, now + lease, cr, now, iu, string.sub(v, pos, pos + n - 1), '')
notify(w, num(rev))
return 'ok'
`)

// releaseScript drops the claim.
//
//	ARGV[3] lease
var releaseScript = redis.NewScript(holderPrelude + `
redis.call('UNLINK', rec)
redis.call('ZREM', idx, string.sub(rec, -64))
notify(w, 'gone')
return 'ok'
`)

// takeOverScript replaces a claim whose lease has run out by the server's clock,
// provided its revision and holder are still the ones the caller saw. The new
// claim keeps the record's creation time and drops any outcome.
//
//	ARGV[3] seen holder (length-prefixed, as in the identity)  ARGV[4] seen revision
//	ARGV[5] lease ms  ARGV[6] the new claim's identity
var takeOverScript = redis.NewScript(prelude + `
local v = load()
if not v then return 'gone' end
local w, st, be, rev, top, lms, lu, cr, _, _, iu, n, pos = parse(v)
if st ~= 'c' or rev ~= tonumber(ARGV[4]) or not starts(v, pos, ARGV[3]) then
  return 'changed'
end
local now = now_ms()
if now < tonumber(lu) then return 'held' end
local lease = tonumber(ARGV[5])
rev, top = next_rev(rev, top, now)
write('c', '0', rev, top, lease, now + lease, cr, now, iu, ARGV[6], '')
notify(w, num(rev))
return 'ok'
`)

// resolveScript applies an operator's decision to an indeterminate record:
// release (ARGV[3] = "1") or complete with outcome ARGV[4]. It answers
// "ok <now> <value>" with the record as it now is, or as it was for a release.
var resolveScript = redis.NewScript(prelude + `
local v = load()
if not v then return 'gone' end
local w, st, be, rev, top, lms, lu, cr, _, _, iu, n, pos = parse(v)
if st ~= 'i' then return 'notindet' end
local now = now_ms()
if ARGV[3] == '1' then
  redis.call('UNLINK', rec)
  redis.call('ZREM', idx, string.sub(rec, -64))
  notify(w, 'gone')
  return 'ok ' .. num(now) .. ' ' .. v
end
rev, top = next_rev(rev, top, now)
local out = write('d', '0', rev, top, lms, lu, cr, now, iu, string.sub(v, pos, pos + n - 1), ARGV[4])
notify(w, num(rev))
return 'ok ' .. num(now) .. ' ' .. out
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
