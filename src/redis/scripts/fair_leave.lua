-- SPDX-License-Identifier: BSD-3-Clause
-- fair_leave.lua: a waiter gives up (deadline or cancel) and leaves the
-- queue, unless the lock was handed to it meanwhile.
--
-- KEYS[1]  the lock key;  KEYS[2]  the queue;  KEYS[3]  our liveness key
-- KEYS[4]  (optional) the fencing counter
-- ARGV[1]  our token;  ARGV[2]  lock TTL in ms (> 0)
-- and, last, the holder identity's key and argument (lib/ident.lua): our
-- waiter's text (KEYS[3] NUL "id", fair_acquire.lua) goes; a confirmed
-- hand-over keeps the identity the release wrote (or writes ours) with
-- the lock's TTL
--
-- Replies  {1, fence}  the lock had been handed to us: we hold it (the
--                      claim is confirmed: TTL ARGV[2] from now)
--          {0, 0}      we left the line; the lock is not ours
--
-- Invariant: a waiter that leaves can never be handed the lock afterwards
-- (its token is gone from the queue and its liveness key deleted). The
-- reads that can fail (a key of another type) come before the writes.
--#include ident.lua
--#include delay.lua
local v = redis.call('get', KEYS[1])
local f = 0
if v == ARGV[1] and #KEYS > 3 then f = tonumber(redis.call('get', KEYS[4]) or '0') or 0 end
redis.call('lrem', KEYS[2], 0, ARGV[1])
redis.call('del', KEYS[3])
if ident_key then redis.pcall('del', KEYS[3] .. '\0id') end
if v == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  if delay_mark then delay_mark(ARGV[1], ARGV[2]) end
  if ident_key then
    if redis.pcall('hexists', ident_key, ARGV[1]) == 1 then
      redis.pcall('pexpire', ident_key, ARGV[2])
    else
      ident_grant(ARGV[1], ARGV[2])
    end
  end
  return {1, f}
end
return {0, 0}
