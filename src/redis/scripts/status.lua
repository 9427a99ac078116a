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
--          whose token the key holds ('' when none is kept, or the key is
--          not a string: identities are kept for exclusive holds only)
--
-- Invariant: read-only.
local e = redis.call('exists', KEYS[1])
local p = redis.call('pttl', KEYS[1])
local f = tonumber(redis.call('get', KEYS[2]) or '0')
if not KEYS[3] then return {e, p, f} end
local v = e == 1 and redis.pcall('get', KEYS[1])
-- pcall: a user without HGET reads no identity rather than no status.
local i = type(v) == 'string' and redis.pcall('hget', KEYS[3], v)
if type(i) ~= 'string' then i = '' end
return {e, p, f, i}
