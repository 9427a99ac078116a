-- SPDX-License-Identifier: BSD-3-Clause
-- reentrant_extend.lua: set a new TTL on a counted lock if we own it.
--
-- KEYS[1]  the lock key
-- ARGV[1]  owner id
-- ARGV[2]  new TTL in ms, > 0
--
-- Replies  1   extended;  0  the key was gone;  -1  another owner's
--          error WRONGTYPE when the key is not a hash
--
-- Invariant: never touches a lock someone else owns; never revives one.
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then return 0 end
if t ~= 'hash' then
  return redis.error_reply('WRONGTYPE lock key holds a ' .. t .. ', not a reentrant dlock lock')
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return -1 end
redis.call('pexpire', KEYS[1], ARGV[2])
return 1
