package store

import "github.com/redis/go-redis/v9"

// The Lua scripts of Redis. Each runs atomically in one round trip. KEYS are the shared
// bookkeeping keys (lru, sizes, bytes, clock, quotas, qbytes) and the response key; the
// scripts also touch response keys and per-key sets they find by walking (Chain) or evicting
// (Put), so the store needs one Redis (or one primary), not a Redis Cluster.
//
// Each script declares its flags (Redis 7 shebang). Put, the one that adds data, declares
// none, so Redis refuses it as a whole, before it writes anything, when it has reached
// maxmemory; the Go side then runs evictScript and tries again. Every other script only
// removes data or rewrites a few bytes in place (the LRU score, the clock, a TTL), so it is
// flagged allow-oom: reads, deletes and evictions go on working when Redis is full.

// luaCommon: stamp() is the server's clock in microseconds, made strictly increasing through
// the clock key (so that the LRU order is exact); touch marks a response key as used (LRU
// score in the store's order and in its quota key's, sliding TTL); drop forgets a response key
// and its accounting. KEYS[1] lru, KEYS[2] sizes, KEYS[3] bytes, KEYS[4] clock, KEYS[5]
// quotas, KEYS[6] qbytes; ARGV[1] is the TTL in milliseconds (0 = none), ARGV[2] the prefix of
// the per-key sorted sets.
const luaCommon = `
local function stamp()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = tonumber(redis.call('GET', KEYS[4]) or '0')
  if us <= last then us = last + 1 end
  redis.call('SET', KEYS[4], us)
  return us
end
local ttl = tonumber(ARGV[1])
local qprefix = ARGV[2]
local function touch(k)
  local t = stamp()
  redis.call('ZADD', KEYS[1], 'XX', t, k)
  local q = redis.call('HGET', KEYS[5], k)
  if q then redis.call('ZADD', qprefix .. q, 'XX', t, k) end
  if ttl > 0 then redis.call('PEXPIRE', k, ttl) end
end
local function drop(k)
  local sz = tonumber(redis.call('HGET', KEYS[2], k) or '0')
  local q = redis.call('HGET', KEYS[5], k)
  if q then
    redis.call('HDEL', KEYS[5], k)
    redis.call('ZREM', qprefix .. q, k)
    if redis.call('HINCRBY', KEYS[6], q, -sz) <= 0 then redis.call('HDEL', KEYS[6], q) end
  end
  redis.call('HDEL', KEYS[2], k)
  redis.call('ZREM', KEYS[1], k)
  redis.call('DEL', k)
  redis.call('DECRBY', KEYS[3], sz)
end
`

// putScript: KEYS[7] the response key; ARGV[3] parent id, [4] response JSON (output []),
// [5] output JSON, [6] input JSON, [7] chain JSON or "" for none, [8] Size, [9] max count,
// [10] max bytes, [11] the quota key (escaped) or "" for none, [12] its max count (0 = none),
// [13] its max bytes (0 = none). It forgets expired entries (at most 100 per call), replaces
// the response, evicts the quota key's own least recently used beyond its quota, then the
// store's least recently used beyond its bounds (never the new one). It returns the number
// evicted over the quota and over the store's bounds.
var putScript = redis.NewScript("#!lua\n" + luaCommon + `
local k = KEYS[7]
local t = stamp()
if ttl > 0 then
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', t - ttl * 1000, 'LIMIT', 0, 100)) do drop(m) end
end
drop(k)
redis.call('HSET', k, 'parent', ARGV[3], 'response', ARGV[4], 'output', ARGV[5], 'input', ARGV[6])
if ARGV[7] ~= '' then redis.call('HSET', k, 'chain', ARGV[7]) end
if ttl > 0 then redis.call('PEXPIRE', k, ttl) end
redis.call('ZADD', KEYS[1], t, k)
redis.call('HSET', KEYS[2], k, ARGV[8])
redis.call('INCRBY', KEYS[3], ARGV[8])
local function oldestBut(set)
  local oldest = redis.call('ZRANGE', set, 0, 1)
  if oldest[1] == k then return oldest[2] end
  return oldest[1]
end
local byKey, byStore = 0, 0
local q = ARGV[11]
if q ~= '' then
  local qset = qprefix .. q
  redis.call('HSET', KEYS[5], k, q)
  redis.call('ZADD', qset, t, k)
  redis.call('HINCRBY', KEYS[6], q, ARGV[8])
  local qCount, qBytes = tonumber(ARGV[12]), tonumber(ARGV[13])
  while true do
    local n = redis.call('ZCARD', qset)
    if n <= 1 then break end
    if not ((qCount > 0 and n > qCount) or (qBytes > 0 and tonumber(redis.call('HGET', KEYS[6], q) or '0') > qBytes)) then break end
    drop(oldestBut(qset))
    byKey = byKey + 1
  end
end
local maxCount, maxBytes = tonumber(ARGV[9]), tonumber(ARGV[10])
while true do
  local n = redis.call('ZCARD', KEYS[1])
  if n <= 1 or (n <= maxCount and tonumber(redis.call('GET', KEYS[3]) or '0') <= maxBytes) then break end
  drop(oldestBut(KEYS[1]))
  byStore = byStore + 1
end
return {byKey, byStore}
`)

// evictScript runs when Redis refused putScript at maxmemory: ARGV[3] is the Size of the
// response to be put. It drops the store's least recently used responses until it has
// dropped at least that many bytes (as Size counts them) and at least one response, and
// returns how many it dropped (0 when the store holds nothing).
var evictScript = redis.NewScript("#!lua flags=allow-oom\n" + luaCommon + `
local want = tonumber(ARGV[3])
local n, freed = 0, 0
while n == 0 or freed < want do
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)
  if not oldest[1] then break end
  freed = freed + tonumber(redis.call('HGET', KEYS[2], oldest[1]) or '0')
  drop(oldest[1])
  n = n + 1
end
return n
`)

// getScript: KEYS[7] the response key; ARGV[3..] hash fields. It returns the fields (nil
// when the key does not exist) and touches the key.
var getScript = redis.NewScript("#!lua flags=allow-oom\n" + luaCommon + `
if redis.call('EXISTS', KEYS[7]) == 0 then return false end
touch(KEYS[7])
local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
return redis.call('HMGET', KEYS[7], unpack(fields))
`)

// deleteScript: KEYS[7] the response key. It returns 1 when it existed, else 0.
var deleteScript = redis.NewScript("#!lua flags=allow-oom\n" + luaCommon + `
local existed = redis.call('EXISTS', KEYS[7])
drop(KEYS[7])
return existed
`)

// chainScript: ARGV[3] the owner's key prefix, [4] the id, [5] the most links to walk. It
// walks parent pointers from the id, touching each response, and returns the id of the
// first response of the chain that is missing ("" when none is), then per link the triple
// input, output, chain ("" when absent), newest first; it stops at the first link that has a
// whole chain.
var chainScript = redis.NewScript("#!lua flags=allow-oom\n" + luaCommon + `
local out = {''}
local cur = ARGV[4]
local n = 0
while cur ~= '' do
  n = n + 1
  if n > tonumber(ARGV[5]) then return redis.error_reply('chain longer than ' .. ARGV[5] .. ' responses') end
  local k = ARGV[3] .. cur
  local v = redis.call('HMGET', k, 'parent', 'input', 'output', 'chain')
  if not v[1] then return {cur} end
  touch(k)
  out[#out + 1] = v[2]
  out[#out + 1] = v[3]
  out[#out + 1] = v[4] or ''
  if v[4] then return out end
  cur = v[1]
end
return out
`)
