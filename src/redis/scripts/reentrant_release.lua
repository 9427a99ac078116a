-- SPDX-License-Identifier: BSD-3-Clause
-- reentrant_release.lua: drop holds of a counted lock; delete the key and
-- wake waiters when the count reaches zero.
--
-- KEYS[1]  the lock key
-- KEYS[2]  (optional) the lock's waiter list: the last release wakes one
--          listed waiter, as release.lua does (lib/waitq.lua)
-- ARGV[1]  owner id
-- ARGV[2]  pub/sub channel to notify waiters on, or '' for none
-- ARGV[3]  TTL in ms to refresh while holds remain, > 0 (never shortens)
-- ARGV[4]  operation number: from the same per-owner sequence as the
--          attempt numbers of reentrant_acquire.lua (decimal, < 2^53)
-- ARGV[5]  holds to drop, >= 1, counted over the handle's run of releases:
--          the releases since ARGV[7] (this one included). 1 for a lone
--          release; more when it carries releases some node has not
--          answered yet, or holds a handle dropped locally after a failed
--          release
-- ARGV[6]  handle id (see reentrant_acquire.lua)
-- ARGV[7]  the number of the run's first release (ARGV[4] for a lone one)
-- and, last, the holder identity's key and argument (lib/ident.lua): the hash
--          keeps the key's TTL while holds remain and goes with the key
--
-- Replies  {1, n}  released; n = holds left (0: key deleted). Also the
--                  reply to a copy of an operation that already ran (a
--                  resend after a lost reply): it changes nothing
--          {0, 0}  the key was gone (the lease had expired), or holds
--                  only holds another handle of the owner took after it
--          {-1, 0} the key belongs to another owner; left untouched
--          error WRONGTYPE when the key is not a hash
--
-- A run: a handle sends no acquire while a release is owed (release.h),
-- so its operations from ARGV[7] on are releases, and a node that ran one
-- of them keeps, with its number (OWNER#HANDLE:s), how many holds of the
-- run it has dropped (OWNER#HANDLE:r). A release drops the rest: what
-- a node that heard none of the run owes, as much as one that heard the
-- run's earlier releases. One copy of the newest release settles every
-- older one, which its number makes look already run (issue 36: a second
-- release that replaced a first one still owed by a node left the first
-- hold in that node's count).
--
-- Invariant: only the owner's own count changes; an operation is applied
-- at most once, so a release whose reply was lost can be sent again; the
-- key goes away exactly when the last hold is released. The wake-up is
-- best effort (pcall), as in release.lua: a refused PUBLISH must not turn a
-- release into an error.
--#include ident.lua
--#include delay.lua
--#include wake.lua
local key, owner, ch, ttl, seq, total = KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local fs, fr = owner .. '#' .. ARGV[6] .. ':s', owner .. '#' .. ARGV[6] .. ':r'
local t = redis.call('type', key).ok
if t == 'none' then return {0, 0} end
if t ~= 'hash' then
  return redis.error_reply('WRONGTYPE lock key holds a ' .. t .. ', not a reentrant dlock lock')
end
local n = tonumber(redis.call('hget', key, owner))
if not n then return {-1, 0} end
local seen = tonumber(redis.call('hget', key, fs))
if not seen then
  -- This handle has no hold in this key: the one it released ended (its
  -- lease ran out, or the key was deleted) and another handle of the same
  -- owner made the key anew. Its holds are not ours to drop.
  return {0, 0}
end
if tonumber(seq) <= seen then
  return {1, n}
end
local done = 0
if seen >= tonumber(ARGV[7]) then done = tonumber(redis.call('hget', key, fr)) or 0 end
n = n - (tonumber(total) - done)
if n > 0 then
  redis.call('hset', key, owner, n, fs, seq, fr, total)
  -- Never shorter: the holds left may be other handles' with longer TTLs.
  if redis.call('pttl', key) < tonumber(ttl) then redis.call('pexpire', key, ttl) end
  if ident_key then redis.call('pexpire', ident_key, redis.call('pttl', key)) end
  if delay_mark then delay_mark(owner, redis.call('pttl', key)) end
  return {1, n}
end
-- The owner's last hold, given back live: no delay (delay.lua).
if delay_clear then delay_clear(owner) end
-- The last hold: the key goes. With nobody listed (no list, or an empty
-- one) everyone is woken, before the waiter list's functions are made (a
-- closure each per call, issue 20).
if ch == '' or not KEYS[2] or redis.pcall('exists', KEYS[2]) ~= 1 then
  redis.call('del', key)
  if ident_key then redis.call('del', ident_key) end
  if ch ~= '' then wake(ch, 'r') end
  return {1, 0}
end
--#include wake_to.lua
--#include waitq.lua
redis.call('del', key)
if ident_key then redis.call('del', ident_key) end
wake_next(ch, KEYS[2])
return {1, 0}
