-- SPDX-License-Identifier: BSD-3-Clause
-- acquire.lua: take a plain lock (a string value with a PX TTL), the same
-- shape redsync, go-zero, node-redlock and redis-py use, so all of them
-- exclude each other on one key.
--
-- KEYS[1]  the lock key
-- KEYS[2]  (optional) the fencing counter of this lock name
-- ARGV[1]  our owner token (128 random bits, hex)
-- ARGV[2]  TTL in ms, > 0 (the client never sends 0 or less)
--
-- Replies  {1, fence}  granted; fence = the counter after INCR (0 if no
--                      counter key was given)
--          {0, pttl, holder}
--                      held by another owner; pttl = its remaining ms
--                      (-1: a key without TTL, which dlock never makes),
--                      holder = its token (lets a Redlock waiter tell one
--                      holder on a majority from a split vote)
--          error WRONGTYPE when the key holds something else than a string,
--                or the fencing counter is not a counter (another type, or
--                a string that is not a decimal below 2^53)
--
-- Invariant: the key is only ever written when absent, so a live lock is
-- never overwritten; the fencing counter only grows, and only on a grant,
-- in the same atomic step as the grant. Every check that can fail runs
-- before the first write: Redis keeps what a script wrote before an error,
-- so an INCR failing after the SET would leave a lock nobody holds.

--#include bad_fence.lua
if redis.call('exists', KEYS[1]) == 0 then
  if #KEYS > 1 then
    local e = bad_fence(KEYS[2])
    if e then return e end
  end
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  local fence = 0
  if #KEYS > 1 then fence = redis.call('incr', KEYS[2]) end
  return {1, fence}
end
local t = redis.call('type', KEYS[1]).ok
if t ~= 'string' then
  return redis.error_reply('WRONGTYPE lock key holds a ' .. t .. ', not a plain dlock lock')
end
return {0, redis.call('pttl', KEYS[1]), redis.call('get', KEYS[1])}
