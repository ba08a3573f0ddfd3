package redisstore

import "github.com/redis/go-redis/v9"

// The Lua scripts below are the store's only writers. Each runs atomically on the
// Redis primary that owns the tenant's hash slot, reads the clock with TIME (so every
// lease deadline is Redis server time), and touches only keys passed in KEYS, all of
// which share the tenant's hash tag.
//
// Every writing script takes the same leading arguments:
//
//	KEYS[1] record hash   <prefix>:{<tenant>}:<digest>
//	KEYS[2] tenant index  <prefix>:{<tenant>}:idx  (sorted set: digest -> expiry ms)
//	KEYS[3] revision seq  <prefix>:{<tenant>}:rev  (string counter)
//	ARGV[1] digest
//	ARGV[2] retention in milliseconds
//	ARGV[3] the record's change channel
//
// Replies are arrays whose first element is a status word; see the status*
// constants.

// Status words returned as the first element of a script's reply.
const (
	statusOK        = "ok"        // the operation was applied
	statusExists    = "exists"    // claim: a live record is already there
	statusGone      = "gone"      // no live record
	statusNotHolder = "notholder" // the lease does not match the record
	statusChanged   = "changed"   // take over: revision or holder differ from seen
	statusHeld      = "held"      // take over: the lease has not run out
	statusNotIndet  = "notindet"  // resolve: the record is not indeterminate
)

// prelude holds the helpers every script uses. Numbers are written with
// string.format('%d') so that Redis stores plain decimal integers.
const prelude = `
local function num(n) return string.format('%d', n) end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- extend makes key live at least ret ms from now, never shortening a longer TTL
-- (stores sharing a prefix may be configured with different retentions).
local function extend(key, ret)
  if redis.call('PTTL', key) < ret then
    redis.call('PEXPIRE', key, ret)
  end
end

-- next_rev hands out the tenant's next revision: above the counter, above old
-- (the record's current revision), and at least the server's time in ms times
-- 1000, so that revisions keep growing even when the counter expired along with
-- the tenant's last record.
local function next_rev(ctr, old, now, ret)
  local r = math.max(tonumber(redis.call('GET', ctr) or '0') + 1, old + 1, now * 1000)
  redis.call('SET', ctr, num(r), 'KEEPTTL')
  extend(ctr, ret)
  return r
end

-- touch stamps a write: retention counts from now, and the index learns the
-- record's new expiry.
local function touch(rec, idx, digest, now, ret)
  redis.call('HSET', rec, 'updated', num(now), 'expires', num(now + ret))
  redis.call('PEXPIRE', rec, ret)
  redis.call('ZADD', idx, num(now + ret), digest)
  extend(idx, ret)
end

-- reply returns {code, now, field, value, ...} with the record's fields, if any.
local function reply(code, now, rec)
  local out = {code, now}
  if rec then
    local h = redis.call('HGETALL', rec)
    for i = 1, #h do out[#out + 1] = h[i] end
  end
  return out
end

-- holder_check answers nil and the record's revision when holder and token
-- hold the live claim, or a status word otherwise.
local function holder_check(rec, holder, token)
  local v = redis.call('HMGET', rec, 'state', 'holder', 'token', 'rev')
  if not v[1] then return 'gone', 0 end
  if v[1] ~= 'claimed' or v[2] ~= holder or v[3] ~= token then
    return 'notholder', 0
  end
  return nil, tonumber(v[4])
end

local rec, idx, ctr = KEYS[1], KEYS[2], KEYS[3]
local digest, ret, chan = ARGV[1], tonumber(ARGV[2]), ARGV[3]
`

// claimScript creates the record if no live one exists; otherwise it returns the
// existing one. It never publishes: waiters only wait on claims that exist. A
// record that already holds this very claim (same holder and token: the client
// retried the script after a timeout, and the first run had landed) is the
// caller's own claim, answered as granted.
//
//	ARGV[4] tenant  ARGV[5] holder  ARGV[6] lease ms  ARGV[7] token
//	ARGV[8] check digest  ARGV[9] tool  ARGV[10] run id  ARGV[11] call id
var claimScript = redis.NewScript(prelude + `
local now = now_ms()
if redis.call('EXISTS', rec) == 1 then
  local own = redis.call('HMGET', rec, 'state', 'holder', 'token')
  if own[1] == 'claimed' and own[2] == ARGV[5] and own[3] == ARGV[7] then
    return reply('ok', now, rec)
  end
  return reply('exists', now, rec)
end
local lease = tonumber(ARGV[6])
local rev = next_rev(ctr, 0, now, ret)
redis.call('HSET', rec,
  'tenant', ARGV[4], 'digest', digest, 'state', 'claimed',
  'holder', ARGV[5], 'token', ARGV[7], 'lease_ms', num(lease),
  'lease_until', num(now + lease), 'rev', num(rev), 'created', num(now),
  'check_digest', ARGV[8], 'tool', ARGV[9], 'run_id', ARGV[10], 'call_id', ARGV[11])
touch(rec, idx, digest, now, ret)
-- Drop index entries whose records have certainly expired (1 s of slack).
redis.call('ZREMRANGEBYSCORE', idx, '-inf', num(now - 1000))
return reply('ok', now, rec)
`)

// readScript returns the record with the server's time, so that a caller can
// judge the lease by Redis's clock. It writes nothing.
var readScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {'gone', now}
local h = redis.call('HGETALL', KEYS[1])
if #h > 0 then out[1] = 'ok' end
for i = 1, #h do out[#out + 1] = h[i] end
return out
`)

// recordScript completes the claim with an outcome.
//
//	ARGV[4] holder  ARGV[5] token  ARGV[6] outcome
var recordScript = redis.NewScript(prelude + `
local bad, rev = holder_check(rec, ARGV[4], ARGV[5])
if bad then return {bad} end
local now = now_ms()
rev = next_rev(ctr, rev, now, ret)
redis.call('HSET', rec, 'state', 'completed', 'outcome', ARGV[6], 'rev', num(rev))
touch(rec, idx, digest, now, ret)
redis.call('PUBLISH', chan, num(rev))
return {'ok', now}
`)

// indeterminateScript parks the claim as indeterminate.
//
//	ARGV[4] holder  ARGV[5] token  ARGV[6] reason  ARGV[7] body entered ("1"/"0")
var indeterminateScript = redis.NewScript(prelude + `
local bad, rev = holder_check(rec, ARGV[4], ARGV[5])
if bad then return {bad} end
local now = now_ms()
rev = next_rev(ctr, rev, now, ret)
redis.call('HSET', rec, 'state', 'indeterminate', 'reason', ARGV[6],
  'body_entered', ARGV[7], 'rev', num(rev))
touch(rec, idx, digest, now, ret)
redis.call('PUBLISH', chan, num(rev))
return {'ok', now}
`)

// renewScript moves the lease deadline to the server's now plus ARGV[6] ms.
//
//	ARGV[4] holder  ARGV[5] token  ARGV[6] lease ms
var renewScript = redis.NewScript(prelude + `
local bad, rev = holder_check(rec, ARGV[4], ARGV[5])
if bad then return {bad} end
local now = now_ms()
local lease = tonumber(ARGV[6])
rev = next_rev(ctr, rev, now, ret)
redis.call('HSET', rec, 'lease_ms', num(lease), 'lease_until', num(now + lease),
  'rev', num(rev))
touch(rec, idx, digest, now, ret)
redis.call('PUBLISH', chan, num(rev))
return {'ok', now}
`)

// releaseScript drops the claim.
//
//	ARGV[4] holder  ARGV[5] token
var releaseScript = redis.NewScript(prelude + `
local bad = holder_check(rec, ARGV[4], ARGV[5])
if bad then return {bad} end
redis.call('UNLINK', rec)
redis.call('ZREM', idx, digest)
redis.call('PUBLISH', chan, 'gone')
return {'ok', 0}
`)

// takeOverScript replaces a claim whose lease has run out by the server's clock,
// provided its revision and holder are still the ones the caller saw.
//
//	ARGV[4] seen revision  ARGV[5] seen holder  ARGV[6] holder  ARGV[7] lease ms
//	ARGV[8] token  ARGV[9] check digest  ARGV[10] tool  ARGV[11] run id
//	ARGV[12] call id
var takeOverScript = redis.NewScript(prelude + `
local v = redis.call('HMGET', rec, 'state', 'holder', 'rev', 'lease_until')
if not v[1] then return {'gone'} end
local now = now_ms()
if v[1] ~= 'claimed' or v[2] ~= ARGV[5] or tonumber(v[3]) ~= tonumber(ARGV[4]) then
  return {'changed'}
end
if now < tonumber(v[4]) then return {'held'} end
local lease = tonumber(ARGV[7])
local rev = next_rev(ctr, tonumber(v[3]), now, ret)
redis.call('HDEL', rec, 'outcome', 'reason', 'body_entered')
redis.call('HSET', rec,
  'holder', ARGV[6], 'token', ARGV[8], 'lease_ms', num(lease),
  'lease_until', num(now + lease), 'rev', num(rev),
  'check_digest', ARGV[9], 'tool', ARGV[10], 'run_id', ARGV[11], 'call_id', ARGV[12])
touch(rec, idx, digest, now, ret)
redis.call('PUBLISH', chan, num(rev))
return reply('ok', now, rec)
`)

// resolveScript applies an operator's decision to an indeterminate record:
// release (ARGV[4] = "1") or complete with outcome ARGV[5]. It returns the record
// as it now is, or as it was for a release.
var resolveScript = redis.NewScript(prelude + `
local st = redis.call('HGET', rec, 'state')
local now = now_ms()
if not st then return {'gone', now} end
if st ~= 'indeterminate' then return reply('notindet', now, rec) end
if ARGV[4] == '1' then
  local out = reply('ok', now, rec)
  redis.call('UNLINK', rec)
  redis.call('ZREM', idx, digest)
  redis.call('PUBLISH', chan, 'gone')
  return out
end
local rev = next_rev(ctr, tonumber(redis.call('HGET', rec, 'rev')), now, ret)
redis.call('HDEL', rec, 'reason', 'body_entered')
redis.call('HSET', rec, 'state', 'completed', 'outcome', ARGV[5], 'rev', num(rev))
touch(rec, idx, digest, now, ret)
redis.call('PUBLISH', chan, num(rev))
return reply('ok', now, rec)
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
