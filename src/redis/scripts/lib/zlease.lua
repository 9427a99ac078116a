-- SPDX-License-Identifier: BSD-3-Clause
-- zlease.lua: shared prelude of the leased-holder kinds (shared locks and
-- semaphores, docs/primitives.md). Their key is a sorted set: each member
-- is one holder's token, scored by the end of its own lease in the
-- server's milliseconds (TIME), so a crashed holder's share ends with its
-- own lease, never with another holder's. A semaphore also keeps the member
-- "\0permits:N" scored +inf: its N, which no pruning removes. The key's own
-- TTL is the end of the last lease, so it vanishes with its last holder.
-- TIME before a write needs effects replication. It is the default since
-- Redis 5, but Redis 5 and 6 can be set to `lua-replicate-commands no`, and
-- then only this call keeps the writes after TIME legal (a no-op on 7).
if redis.replicate_commands then redis.replicate_commands() end
local ZLEASE_SENTINEL = '\0permits:'
local function zlease_now()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- The N a semaphore's key stores, or nil (a shared lock, or no key).
local function zlease_permits(key)
  local s = redis.call('zrangebyscore', key, '+inf', '+inf', 'LIMIT', 0, 1)
  if #s == 0 then return nil end
  return tonumber(string.sub(s[1], #ZLEASE_SENTINEL + 1))
end
-- Prune ended leases; TTL of the key = end of its last lease; no lease
-- left: no key (a semaphore's N goes with it).
local function zlease_expire(key, now)
  redis.call('zremrangebyscore', key, '-inf', now)
  local top = redis.call('zrevrangebyscore', key, '(inf', '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #top == 0 then
    redis.call('del', key)
    return
  end
  local ms = tonumber(top[2]) - now
  if ms < 1 then ms = 1 end
  redis.call('pexpire', key, ms)
end
-- Our member's lease end in a leased-holder key, or nil and the reply the
-- caller returns as is: 0 when there is no key, -1 when the key is a
-- writer's string or has no member of ours; a key of another type is a
-- WRONGTYPE error. Reads only: the caller has written nothing yet.
local function zlease_score_of(key, member)
  local t = redis.call('type', key).ok
  if t == 'none' then return nil, 0 end
  if t == 'string' then return nil, -1 end
  if t ~= 'zset' then
    return nil, redis.error_reply('WRONGTYPE lock key holds a ' .. t ..
                                  ', not a shared lock or semaphore')
  end
  local s = redis.call('zscore', key, member)
  if not s then return nil, -1 end
  return tonumber(s)
end
-- The holder identities (lib/ident.lua) of a leased-holder key: the hash
-- idk holds one field per holder token. Called before zlease_expire (and
-- after the caller's own ZREM or ZADD), it drops the fields of the leases
-- ended by now, and of `drop` (a released token), and gives the hash the
-- TTL of the last live lease, or deletes it with the last one: no field
-- outlives the key, and none outlives its lease past the next call that
-- touches the key with an identity. pcall throughout: it runs after the
-- script's writes and must never fail it. Nothing without idk.
local function zlease_ident(key, idk, now, drop)
  if not idk then return end
  local gone = redis.pcall('zrangebyscore', key, '-inf', now)
  if type(gone) ~= 'table' then gone = {} end
  if drop then gone[#gone + 1] = drop end
  for i = 1, #gone, 100 do
    redis.pcall('hdel', idk, unpack(gone, i, math.min(i + 99, #gone)))
  end
  local top = redis.pcall('zrevrangebyscore', key, '(inf', '(' .. now, 'WITHSCORES', 'LIMIT', 0, 1)
  if type(top) == 'table' and top[2] then
    local ms = tonumber(top[2]) - now
    if ms < 1 then ms = 1 end
    redis.pcall('pexpire', idk, ms)
  else
    redis.pcall('del', idk)
  end
end
