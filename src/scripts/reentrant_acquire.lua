-- SPDX-License-Identifier: BSD-3-Clause
-- reentrant_acquire.lua: take or re-enter a counted lock, stored as a hash
-- {owner -> hold count} with a PX TTL on the key.
--
-- KEYS[1]  the lock key
-- KEYS[2]  (optional) the fencing counter of this lock name
-- ARGV[1]  owner id: the client's 128-bit random id and a thread number
-- ARGV[2]  TTL in ms, > 0
--
-- Replies  {1, fence, count}  granted; count = holds by this owner now.
--                             fence: the new counter value on a first hold,
--                             the current one on a re-entry (same hold)
--          {0, pttl, holder}  held by another owner: its remaining ms and
--                             its owner id
--          error WRONGTYPE    the key exists and is not a hash
--
-- Invariant: a hash has one owner field at most; only that owner can raise
-- its count; every grant refreshes the TTL.
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
  redis.call('hset', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  local fence = 0
  if #KEYS > 1 then fence = redis.call('incr', KEYS[2]) end
  return {1, fence, 1}
end
if t ~= 'hash' then
  return redis.error_reply('WRONGTYPE lock key holds a ' .. t .. ', not a reentrant dlock lock')
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  local n = redis.call('hincrby', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  local fence = 0
  if #KEYS > 1 then fence = tonumber(redis.call('get', KEYS[2]) or '0') end
  return {1, fence, n}
end
return {0, redis.call('pttl', KEYS[1]), redis.call('hkeys', KEYS[1])[1] or ''}
