-- SPDX-License-Identifier: BSD-3-Clause
-- status.lua: look at a lock without changing anything.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter of this lock name
-- KEYS[3]  (optional) the lock's holder identity hash (lib/ident.lua)
--
-- Replies  {exists, pttl, fence}: exists 1 or 0; pttl the remaining ms
--          (-2 absent, -1 no TTL); fence the counter (0 if none yet);
--          with KEYS[3] a fourth element, the identity of the holder
--          whose token the key holds, or of a reentrant lock's owner (its
--          one field without '#'), or of a shared lock's or semaphore's
--          live holders, in the order their leases end, joined by "; " (at
--          most IDENT_LISTED of them, then "; +N more"; holders that keep
--          none are left out); '' when none is kept
--
-- Invariant: read-only.
local e = redis.call('exists', KEYS[1])
local p = redis.call('pttl', KEYS[1])
local f = tonumber(redis.call('get', KEYS[2]) or '0')
if not KEYS[3] then return {e, p, f} end
local v = e == 1 and redis.pcall('get', KEYS[1])
if type(v) == 'table' and redis.call('type', KEYS[1]).ok == 'hash' then
  v = nil
  for _, f in ipairs(redis.call('hkeys', KEYS[1])) do
    if not string.find(f, '#', 1, true) then v = f break end
  end
end
-- pcall: a user without HGET reads no identity rather than no status.
local i = type(v) == 'string' and redis.pcall('hget', KEYS[3], v)
if e == 1 and redis.call('type', KEYS[1]).ok == 'zset' then
  -- Several holders: each one's, by lease end (the members scored +inf,
  -- a semaphore's N, are no holders; zlease.lua). Read-only: TIME only.
  local IDENT_LISTED = 8
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  -- The first few only: dlock list reads every lock this way.
  local m = redis.call('zrangebyscore', KEYS[1], '(' .. now, '(inf', 'LIMIT', 0, IDENT_LISTED)
  local ids = {}
  for k = 1, #m do
    local x = redis.pcall('hget', KEYS[3], m[k])
    if type(x) == 'string' then ids[#ids + 1] = x end
  end
  local live = #m == IDENT_LISTED and redis.call('zcount', KEYS[1], '(' .. now, '(inf') or #m
  if live > IDENT_LISTED and #ids > 0 then ids[#ids + 1] = '+' .. (live - IDENT_LISTED) .. ' more' end
  i = table.concat(ids, '; ')
end
if type(i) ~= 'string' then i = '' end
return {e, p, f, i}
