-- SPDX-License-Identifier: BSD-3-Clause
-- reentrant_extend.lua: set a new TTL on a counted lock if we own it.
--
-- KEYS[1]  the lock key
-- ARGV[1]  owner id
-- ARGV[2]  new TTL in ms, > 0: the key keeps at least this long
-- and, last, the holder identity's key and argument (lib/ident.lua): the hash
--          gets the key's TTL
--
-- Replies  1   extended;  0  the key was gone;  -1  another owner's
--          error WRONGTYPE when the key is not a hash
--
-- Invariant: never touches a lock someone else owns; never revives one;
-- never shortens its TTL: the key is shared by every handle of the owner,
-- and another may count on a longer lease than this one asks for.
--#include ident.lua
--#include delay.lua
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then return 0 end
if t ~= 'hash' then
  return redis.error_reply('WRONGTYPE lock key holds a ' .. t .. ', not a reentrant dlock lock')
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return -1 end
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('pexpire', KEYS[1], ARGV[2])
end
if ident_key then redis.call('pexpire', ident_key, redis.call('pttl', KEYS[1])) end
if delay_mark then delay_mark(ARGV[1], redis.call('pttl', KEYS[1])) end
return 1
