-- SPDX-License-Identifier: BSD-3-Clause
-- fence_sync.lua: raise a fencing counter to at least a given value.
-- Redlock takes the largest counter of its majority as the fencing token and
-- writes it back to a majority with this script before it reports success:
-- any later majority shares a node with this one, so its INCR there yields a
-- larger token (docs/fencing.md has the argument).
--
-- KEYS[1]  the fencing counter
-- ARGV[1]  the token to make the counter at least (decimal, < 2^53)
--
-- Replies  the counter's value afterwards
--          error WRONGTYPE when the counter is not a counter; nothing written
--
-- Invariant: the counter never decreases.
local s = redis.call('get', KEYS[1]) or '0'
local c = tonumber(s)
if not c or not string.match(s, '^%d+$') then
  return redis.error_reply('WRONGTYPE the fencing counter of this lock is not a counter')
end
local v = tonumber(ARGV[1])
if v > c then
  redis.call('set', KEYS[1], ARGV[1])
  return v
end
return c
