-- SPDX-License-Identifier: BSD-3-Clause
-- extend.lua: set a new TTL on a plain lock only if it still holds our token.
--
-- KEYS[1]  the lock key
-- ARGV[1]  our owner token
-- ARGV[2]  new TTL in ms, > 0 (PEXPIRE with 0 or less would delete the key;
--          the client never sends it)
-- and, last, the holder identity's key and argument (lib/ident.lua): its
-- hash gets the same TTL (a no-op when it is gone)
--
-- Replies  1   extended
--          0   the key was gone (too late: the lease had ended)
--          -1  the key holds another owner's token; left untouched
--          error WRONGTYPE when the key is not a string
--
-- Invariant: never touches a lock someone else owns; never revives an
-- expired one.
--#include ident.lua
--#include delay.lua
local v = redis.call('get', KEYS[1])
if v == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  if ident_key then redis.call('pexpire', ident_key, ARGV[2]) end
  if delay_mark then delay_mark(ARGV[1], ARGV[2]) end
  return 1
end
if not v then return 0 end
return -1
