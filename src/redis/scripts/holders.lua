-- SPDX-License-Identifier: BSD-3-Clause
-- holders.lua: who holds a lock now, without changing anything.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the writer-waiting mark, KEY NUL "ww"
--
-- Replies  {mode, permits, mark_pttl, token1, ttl1, token2, ttl2, ...}
--          mode 0 free, 1 exclusive (string), 2 shared (sorted set),
--          3 semaphore (sorted set with its N), 4 a reentrant lock (a
--          hash with a TTL), 5 not a lock dlock writes (a list, a set, a
--          stream, or a hash or sorted set without a TTL: every dlock hash
--          and sorted set has one); permits N for a semaphore, else 0;
--          mark_pttl the writer-waiting mark's ms, or -2; then each live
--          holder's token and remaining lease in ms (expired members are
--          skipped); for mode 5 one pair instead: the key's type and its
--          PTTL.
--
-- Invariant: read-only (TIME is read, nothing is written).
local key = KEYS[1]
local t = redis.call('type', key).ok
local mark = redis.call('pttl', KEYS[2])
if t == 'none' then return {0, 0, mark} end
if t == 'string' then
  return {1, 0, mark, redis.call('get', key), redis.call('pttl', key)}
end
local pttl = redis.call('pttl', key)
if (t ~= 'zset' and t ~= 'hash') or pttl < 0 then return {5, 0, mark, t, pttl} end
if t ~= 'zset' then return {4, 0, mark} end
local tm = redis.call('time')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local s = redis.call('zrangebyscore', key, '+inf', '+inf', 'LIMIT', 0, 1)
local out = {2, 0, mark}
if #s > 0 then
  out[1] = 3
  out[2] = tonumber(string.sub(s[1], 10))
end
local m = redis.call('zrangebyscore', key, '(' .. now, '(inf', 'WITHSCORES')
for i = 1, #m, 2 do
  out[#out + 1] = m[i]
  out[#out + 1] = tonumber(m[i + 1]) - now
end
return out
