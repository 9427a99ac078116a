-- SPDX-License-Identifier: BSD-3-Clause
-- reentrant_release.lua: drop one hold of a counted lock; delete the key and
-- wake waiters when the count reaches zero.
--
-- KEYS[1]  the lock key
-- ARGV[1]  owner id
-- ARGV[2]  pub/sub channel to notify waiters on, or '' for none
-- ARGV[3]  TTL in ms to refresh while holds remain, > 0
--
-- Replies  {1, n}  released one hold; n = holds left (0: key deleted)
--          {0, 0}  the key was gone (the lease had expired)
--          {-1, 0} the key belongs to another owner; left untouched
--          error WRONGTYPE when the key is not a hash
--
-- Invariant: only the owner's own count changes; the key goes away exactly
-- when the last hold is released. The wake-up is best effort (pcall), as in
-- release.lua: a refused PUBLISH must not turn a release into an error.
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then return {0, 0} end
if t ~= 'hash' then
  return redis.error_reply('WRONGTYPE lock key holds a ' .. t .. ', not a reentrant dlock lock')
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return {-1, 0} end
local n = redis.call('hincrby', KEYS[1], ARGV[1], -1)
if n > 0 then
  redis.call('pexpire', KEYS[1], ARGV[3])
  return {1, n}
end
redis.call('del', KEYS[1])
if ARGV[2] ~= '' then redis.pcall('publish', ARGV[2], 'r') end
return {1, 0}
