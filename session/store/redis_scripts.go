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
// score in the store's order and in its quota key's, sliding TTL of it and of its item index
// entries); drop forgets a response key, its accounting and its item index entries. KEYS[1]
// lru, KEYS[2] sizes, KEYS[3] bytes, KEYS[4] clock, KEYS[5] quotas, KEYS[6] qbytes, KEYS[7]
// iclock, KEYS[8] legacy, KEYS[9] itemidx; ARGV[1] is the TTL in milliseconds (0 = none),
// ARGV[2] the store's key prefix.
//
// The item index: a response key's hash field items lists the distinct ids of its input and
// output items (a JSON array), and <prefix>i:<owner>:<item id> is the set of the owner's
// response keys that hold that id, living at least as long as each of them. An older build
// writes responses without it: stamp() copies each stamp it gives out to iclock, so a clock
// that differs from iclock was stamped by an older build since, which it counts in legacy;
// itemidx holds the legacy count at the start of the last complete walk that indexed every
// stored response (reindexScript), and the index is complete while the two are equal.
const luaCommon = `
local ttl = tonumber(ARGV[1])
local prefix = ARGV[2]
local qprefix = prefix .. 'q:'
local function sync()
  local clock = redis.call('GET', KEYS[4])
  if clock ~= redis.call('GET', KEYS[7]) then
    redis.call('INCR', KEYS[8])
    if clock then redis.call('SET', KEYS[7], clock) else redis.call('DEL', KEYS[7]) end
  end
end
local function stamp()
  sync()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = tonumber(redis.call('GET', KEYS[4]) or '0')
  if us <= last then us = last + 1 end
  redis.call('SET', KEYS[4], us)
  redis.call('SET', KEYS[7], us)
  return us
end
local function iprefix(k)
  return prefix .. 'i:' .. string.match(k, '^([^:]*):', #prefix + 3) .. ':'
end
local function itemIDs(k)
  local v = redis.call('HGET', k, 'items')
  if not v then return nil end
  return cjson.decode(v)
end
local function hold(ik, k, ms, add)
  local p = redis.call('PTTL', ik)
  if add or p == -2 then redis.call('SADD', ik, k) end
  if ms < 0 then
    if p >= 0 then redis.call('PERSIST', ik) end
  elseif p == -2 or (p >= 0 and p < ms) then
    redis.call('PEXPIRE', ik, ms)
  end
end
local function holdAll(k, ms, add)
  local list = itemIDs(k)
  if not list then return end
  local ip = iprefix(k)
  for _, id in ipairs(list) do hold(ip .. id, k, ms, add) end
end
local function touch(k)
  local t = stamp()
  redis.call('ZADD', KEYS[1], 'XX', t, k)
  local q = redis.call('HGET', KEYS[5], k)
  if q then redis.call('ZADD', qprefix .. q, 'XX', t, k) end
  if ttl > 0 then
    redis.call('PEXPIRE', k, ttl)
    holdAll(k, ttl, false)
  end
end
local function drop(k)
  local list = itemIDs(k)
  if list then
    local ip = iprefix(k)
    for _, id in ipairs(list) do redis.call('SREM', ip .. id, k) end
  end
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

// putScript: KEYS[10] the response key; ARGV[3] parent id, [4] response JSON (output []),
// [5] output JSON, [6] input JSON, [7] chain JSON or "" for none, [8] Size, [9] max count,
// [10] max bytes, [11] the quota key (escaped) or "" for none, [12] its max count (0 = none),
// [13] its max bytes (0 = none), [14] the distinct ids of the input and output items (a JSON
// array). It forgets expired entries (at most 100 per call), replaces the response and its
// item index entries, evicts the quota key's own least recently used beyond its quota, then the
// store's least recently used beyond its bounds (never the new one). It returns the number
// evicted over the quota and over the store's bounds.
var putScript = redis.NewScript("#!lua\n" + luaCommon + `
local k = KEYS[10]
local t = stamp()
if ttl > 0 then
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', t - ttl * 1000, 'LIMIT', 0, 100)) do drop(m) end
end
drop(k)
redis.call('HSET', k, 'parent', ARGV[3], 'response', ARGV[4], 'output', ARGV[5], 'input', ARGV[6], 'items', ARGV[14])
if ARGV[7] ~= '' then redis.call('HSET', k, 'chain', ARGV[7]) end
if ttl > 0 then
  redis.call('PEXPIRE', k, ttl)
  holdAll(k, ttl, true)
else
  holdAll(k, -1, true)
end
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

// getScript: KEYS[10] the response key; ARGV[3..] hash fields. It returns the fields (nil
// when the key does not exist) and touches the key.
var getScript = redis.NewScript("#!lua flags=allow-oom\n" + luaCommon + `
if redis.call('EXISTS', KEYS[10]) == 0 then return false end
touch(KEYS[10])
local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
return redis.call('HMGET', KEYS[10], unpack(fields))
`)

// deleteScript: KEYS[10] the response key. It returns 1 when it existed, else 0.
var deleteScript = redis.NewScript("#!lua flags=allow-oom\n" + luaCommon + `
local existed = redis.call('EXISTS', KEYS[10])
drop(KEYS[10])
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

// findScript: ARGV[3] the owner's item index prefix (<prefix>i:<owner>:), [4...] distinct
// item ids. It changes nothing. For each id it takes, of the response keys its index set
// names, the most recently used (by its lru score) whose items field still lists the id: a
// stale entry (a response that an older build dropped, or that expired before its index set)
// is passed over. It returns 1 when the index is complete (see luaCommon) else 0, then per id
// the response key found ("" for none), then per distinct response key found the triple
// key, input, output.
var findScript = redis.NewScript("#!lua flags=no-writes,allow-oom\n" + luaCommon + `
local legacy = redis.call('GET', KEYS[8]) or '0'
local complete = 0
if redis.call('GET', KEYS[9]) == legacy and redis.call('GET', KEYS[4]) == redis.call('GET', KEYS[7]) then complete = 1 end
local out = {complete}
local held, listed, found = {}, {}, {}
for i = 4, #ARGV do
  local id = ARGV[i]
  local best, bestScore = '', nil
  for _, k in ipairs(redis.call('SMEMBERS', ARGV[3] .. id)) do
    local h = held[k]
    if h == nil then
      h = false
      local list = itemIDs(k)
      if list then
        h = {}
        for _, x in ipairs(list) do h[x] = true end
      end
      held[k] = h
    end
    if h and h[id] then
      local sc = tonumber(redis.call('ZSCORE', KEYS[1], k) or '0')
      if not bestScore or sc > bestScore then best, bestScore = k, sc end
    end
  end
  out[#out + 1] = best
  if best ~= '' and not listed[best] then
    listed[best] = true
    found[#found + 1] = best
  end
end
for _, k in ipairs(found) do
  local v = redis.call('HMGET', k, 'input', 'output')
  out[#out + 1] = k
  out[#out + 1] = v[1] or 'null'
  out[#out + 1] = v[2] or 'null'
end
return out
`)

// reindexGenScript starts a walk of reindexScript: it returns the legacy count (see
// luaCommon), after counting a stamp of an older build not counted yet.
var reindexGenScript = redis.NewScript("#!lua flags=allow-oom\n" + luaCommon + `
sync()
return redis.call('GET', KEYS[8]) or '0'
`)

// reindexScript: ARGV[3...] response keys. It writes the item index entries of each one that
// still exists: the items field of a response an older build wrote (from the ids of its input
// and output), and each index set (added again when it is missing, its TTL at least the
// response's).
var reindexScript = redis.NewScript("#!lua flags=allow-oom\n" + luaCommon + `
for i = 3, #ARGV do
  local k = ARGV[i]
  local v = {redis.call('HGET', k, 'items')}
  if not v[1] then
    v = redis.call('HMGET', k, 'items', 'input', 'output')
  end
  if v[1] or v[2] then
    if not v[1] then
      local seen, list = {}, {}
      for j = 2, 3 do
        local ok, items = pcall(cjson.decode, v[j] or 'null')
        if ok and type(items) == 'table' then
          for _, it in ipairs(items) do
            if type(it) == 'table' and type(it.id) == 'string' and it.id ~= '' and not seen[it.id] then
              seen[it.id] = true
              list[#list + 1] = it.id
            end
          end
        end
      end
      if #list == 0 then
        redis.call('HSET', k, 'items', '[]')
      else
        redis.call('HSET', k, 'items', cjson.encode(list))
      end
    end
    holdAll(k, redis.call('PTTL', k), true)
  end
end
return 0
`)

// reindexMarkScript ends a walk of reindexScript that started at the legacy count ARGV[3]:
// when no older build has stamped since, it marks the index complete (itemidx) and returns
// 1; else it returns 0.
var reindexMarkScript = redis.NewScript("#!lua flags=allow-oom\n" + luaCommon + `
sync()
if (redis.call('GET', KEYS[8]) or '0') ~= ARGV[3] then return 0 end
redis.call('SET', KEYS[9], ARGV[3])
return 1
`)
