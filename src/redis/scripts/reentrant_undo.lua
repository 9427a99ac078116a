-- SPDX-License-Identifier: BSD-3-Clause
-- reentrant_undo.lua: take back the hold one acquire attempt may have
-- added, after its reply was lost (outcome unknown) or came too late.
--
-- KEYS[1]  the lock key
-- ARGV[1]  owner id
-- ARGV[2]  the attempt number given to reentrant_acquire.lua
-- ARGV[3]  pub/sub channel to notify waiters on, or '' for none
-- ARGV[4]  the handle id given to reentrant_acquire.lua
-- and, last, the holder identity's key and argument (lib/ident.lua): the
--          hash goes with the key
--
-- Replies  1  the attempt had added a hold; it is taken back (the key is
--             deleted, and waiters woken, when no hold is left)
--          0  nothing to take back: the attempt never ran here (it will
--             not run later either: its number is marked as seen, so a
--             delayed copy changes nothing), it was already undone, or the
--             key is gone or another owner's
--
-- Invariant: an undo removes at most the one hold its own attempt added,
-- exactly once, and never another handle's hold of the same owner (the
-- shared owner id alone cannot tell them apart: the attempt number can).
-- The handle sends no newer operation before an undo has been answered,
-- so OWNER#HANDLE:u still names the attempt when its undo runs.
--#include ident.lua
--#include delay.lua
--#include wake.lua
local key, owner, seq, ch = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local fs, fu = owner .. '#' .. ARGV[4] .. ':s', owner .. '#' .. ARGV[4] .. ':u'
if redis.call('type', key).ok ~= 'hash' then return 0 end
local n = tonumber(redis.call('hget', key, owner))
if not n then return 0 end
local seen = tonumber(redis.call('hget', key, fs)) or 0
if seen < tonumber(seq) then
  -- The attempt has not run yet (its copy may still be on its way).
  redis.call('hset', key, fs, seq)
  return 0
end
if redis.call('hget', key, fu) ~= seq then return 0 end
if n > 1 then
  redis.call('hset', key, owner, n - 1)
  redis.call('hdel', key, fu)
  return 1
end
redis.call('del', key)
if ident_key then redis.call('del', ident_key) end
if delay_clear then delay_clear(owner) end
if ch ~= '' then wake(ch, 'r') end
return 1
