-- SPDX-License-Identifier: BSD-3-Clause
-- status.lua: look at a lock without changing anything.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter of this lock name
--
-- Replies  {exists, pttl, fence}: exists 1 or 0; pttl the remaining ms
--          (-2 absent, -1 no TTL); fence the counter (0 if none yet)
--
-- Invariant: read-only.
local e = redis.call('exists', KEYS[1])
local p = redis.call('pttl', KEYS[1])
local f = tonumber(redis.call('get', KEYS[2]) or '0')
return {e, p, f}
