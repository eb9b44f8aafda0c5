package store

import "github.com/redis/go-redis/v9"

// The Lua scripts of Redis. Each runs atomically in one round trip. KEYS are the shared
// bookkeeping keys (lru, sizes, bytes, clock) and the response key; the scripts also touch response keys
// they find by walking (Chain) or evicting (Put), so the store needs one Redis (or one
// primary), not a Redis Cluster.

// luaCommon: stamp() is the server's clock in microseconds, made strictly increasing through
// the clock key (so that the LRU order is exact); touch marks a response key as used (LRU
// score and sliding TTL); drop forgets a response key and its accounting. KEYS[1] lru,
// KEYS[2] sizes, KEYS[3] bytes, KEYS[4] clock; TTL is ARGV[1] in milliseconds (0 = none).
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
local function touch(k)
  redis.call('ZADD', KEYS[1], 'XX', stamp(), k)
  if ttl > 0 then redis.call('PEXPIRE', k, ttl) end
end
local function drop(k)
  local sz = tonumber(redis.call('HGET', KEYS[2], k) or '0')
  redis.call('HDEL', KEYS[2], k)
  redis.call('ZREM', KEYS[1], k)
  redis.call('DEL', k)
  redis.call('DECRBY', KEYS[3], sz)
end
`

// putScript: KEYS[5] the response key; ARGV[2] parent id, [3] response JSON (output []),
// [4] output JSON, [5] input JSON, [6] chain JSON or "" for none, [7] Size, [8] max count,
// [9] max bytes. It forgets expired entries (at most 100 per call), replaces the response,
// then evicts the least recently used beyond the bounds (never the new one).
var putScript = redis.NewScript(luaCommon + `
local k = KEYS[5]
local t = stamp()
if ttl > 0 then
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', t - ttl * 1000, 'LIMIT', 0, 100)) do drop(m) end
end
drop(k)
redis.call('HSET', k, 'parent', ARGV[2], 'response', ARGV[3], 'output', ARGV[4], 'input', ARGV[5])
if ARGV[6] ~= '' then redis.call('HSET', k, 'chain', ARGV[6]) end
if ttl > 0 then redis.call('PEXPIRE', k, ttl) end
redis.call('ZADD', KEYS[1], t, k)
redis.call('HSET', KEYS[2], k, ARGV[7])
redis.call('INCRBY', KEYS[3], ARGV[7])
local maxCount, maxBytes = tonumber(ARGV[8]), tonumber(ARGV[9])
while true do
  local n = redis.call('ZCARD', KEYS[1])
  if n <= 1 or (n <= maxCount and tonumber(redis.call('GET', KEYS[3]) or '0') <= maxBytes) then break end
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 1)
  local m = oldest[1]
  if m == k then m = oldest[2] end
  drop(m)
end
return 1
`)

// getScript: KEYS[5] the response key; ARGV[2..] hash fields. It returns the fields (nil
// when the key does not exist) and touches the key.
var getScript = redis.NewScript(luaCommon + `
if redis.call('EXISTS', KEYS[5]) == 0 then return false end
touch(KEYS[5])
local fields = {}
for i = 2, #ARGV do fields[#fields + 1] = ARGV[i] end
return redis.call('HMGET', KEYS[5], unpack(fields))
`)

// deleteScript: KEYS[5] the response key. It returns 1 when it existed, else 0.
var deleteScript = redis.NewScript(luaCommon + `
local existed = redis.call('EXISTS', KEYS[5])
drop(KEYS[5])
return existed
`)

// chainScript: ARGV[2] the owner's key prefix, [3] the id, [4] the most links to walk. It
// walks parent pointers from the id, touching each response, and returns per link the
// triple input, output, chain ("" when absent), newest first; it stops at the first link that
// has a whole chain. It returns nil when a response of the chain is missing.
var chainScript = redis.NewScript(luaCommon + `
local out = {}
local cur = ARGV[3]
local n = 0
while cur ~= '' do
  n = n + 1
  if n > tonumber(ARGV[4]) then return redis.error_reply('chain longer than ' .. ARGV[4] .. ' responses') end
  local k = ARGV[2] .. cur
  local v = redis.call('HMGET', k, 'parent', 'input', 'output', 'chain')
  if not v[1] then return false end
  touch(k)
  out[#out + 1] = v[2]
  out[#out + 1] = v[3]
  out[#out + 1] = v[4] or ''
  if v[4] then return out end
  cur = v[1]
end
return out
`)
