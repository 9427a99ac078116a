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
--          one field without '#'); '' when none is kept (shared locks and
--          semaphores keep none)
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
if type(i) ~= 'string' then i = '' end
return {e, p, f, i}
