-- SPDX-License-Identifier: BSD-3-Clause
-- restore_batch.lua: put back plain locks that a node lost while a
-- majority kept them (Redlock; the watchdog's round, src/engine/watchdog.c).
--
-- KEYS[i]      lock key i
-- ARGV[2i-1]   owner token of lock i
-- ARGV[2i]     TTL in ms for lock i, > 0
--
-- Replies  an array, one entry per key:
--          1   the key holds our token now, with the TTL given
--          0   the key holds something else (another owner's token, or
--              another type): left untouched
--
-- Why: a node that was stopped or cut off for longer than the TTL comes
-- back without the key (it expired there). The holder still has its
-- majority, but from then on one more faulty node costs it the lock:
-- "never giving up while a majority is still there" needs the key back.
-- The watchdog sends this only to nodes that answered "gone" in a round
-- in which a majority renewed the lock, and before the round ends, so a
-- release (which waits for the round) can never be overtaken by it.
--
-- Invariant: never touches a key someone else holds (SET NX); a single
-- node's key never makes a second majority, so putting it back cannot
-- give anyone the lock, and it expires with its TTL like any other.
local out = {}
for i = 1, #KEYS do
  local tok, ttl = ARGV[2 * i - 1], ARGV[2 * i]
  local r = 0
  if redis.call('set', KEYS[i], tok, 'PX', ttl, 'NX') then
    r = 1
  elseif redis.call('type', KEYS[i]).ok == 'string' and redis.call('get', KEYS[i]) == tok then
    redis.call('pexpire', KEYS[i], ttl)
    r = 1
  end
  out[i] = r
end
return out
