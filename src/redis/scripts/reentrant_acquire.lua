-- SPDX-License-Identifier: BSD-3-Clause
-- reentrant_acquire.lua: take or re-enter a counted lock, stored as a hash
-- {owner -> hold count} with a PX TTL on the key.
--
-- KEYS[1]  the lock key
-- KEYS[2]  (optional) the fencing counter of this lock name
-- ARGV[1]  owner id: the client's 128-bit random id and a thread number
-- ARGV[2]  TTL in ms, > 0
-- ARGV[3]  attempt number: grows with every operation of this owner
--          (decimal, < 2^53), so reentrant_undo.lua can take back exactly
--          this attempt's hold
-- ARGV[4]  handle id: names the client's handle among the owner's handles
-- ARGV[5]  (optional) a subscribed waiter's wait id: then the last key is
--          the lock's waiter list, as in acquire.lua (lib/waitq.lua)
-- ARGV[6]  (with ARGV[5]) how long the waiter's entry lives, in ms
-- and, last, the holder identity's key and argument (lib/ident.lua),
-- written on a first hold (a re-entry keeps the first hold's "since")
--
-- Replies  {1, fence, count}  granted; count = holds by this owner now.
--                             fence: the new counter value on a first hold,
--                             the current one on a re-entry (same hold)
--          {0, pttl, holder}  held by another owner: its remaining ms and
--                             its owner id. Also the reply to an attempt
--                             older than one this handle already made or
--                             undid (a copy delayed on a dead connection):
--                             it changes nothing
--          error WRONGTYPE    the key exists and is not a hash, or the
--                             fencing counter is not a counter
--
-- Besides the owner's count the hash keeps bookkeeping fields per handle
-- of the owner: OWNER#HANDLE:s, the newest operation number of the
-- handle seen (run or undone), OWNER#HANDLE:u, its attempt whose
-- increment an undo may still take back, and OWNER#HANDLE:r, the holds
-- its current run of releases dropped (reentrant_release.lua). Per handle, because each handle
-- sends its own operations in order and resends its own: another handle's
-- newer operation must not make them look stale. They go with the key, or
-- earlier with reentrant_forget.lua when the handle is freed.
--
-- Invariant: a hash has one owner at most; only that owner can raise its
-- count; every grant refreshes the TTL, and a re-entry never shortens it
-- (the owner's other handles, perhaps with longer TTLs, count on it); an attempt runs at most once and
-- never after its undo. Every check that can fail runs before the first
-- write (Redis keeps what a script wrote before an error).
--#include ident.lua
--#include delay.lua
local key, owner, ttl, seq = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local fs, fu = owner .. '#' .. ARGV[4] .. ':s', owner .. '#' .. ARGV[4] .. ':u'

--#include bad_fence.lua
local id = ARGV[5]
local wq = id and KEYS[#KEYS]
local fk = (#KEYS - (id and 1 or 0)) > 1 and KEYS[2]

local t = redis.call('type', key).ok
if t == 'none' then
  if fk then
    local e = bad_fence(fk)
    if e then return e end
  end
  if delay_left then -- a lock-delay (delay.lua): no live hold, so every mark counts
    local ms = delay_left()
    if ms > 0 then return delay_refused(ms) end
  end
  -- PEXPIRE first, where it writes nothing (no key yet): an ACL that
  -- refuses it refuses the script before the HSET, which would otherwise
  -- leave a hash without a TTL.
  redis.call('pexpire', key, ttl)
  redis.call('hset', key, owner, 1, fs, seq, fu, seq)
  redis.call('pexpire', key, ttl)
  local fence = 0
  if fk then fence = redis.call('incr', fk) end
  if ident_grant then ident_grant(owner, ttl) end
  if delay_mark then delay_mark(owner, ttl) end
  if id then redis.pcall('zrem', wq, id) end
  return {1, fence, 1}
end
if t ~= 'hash' then
  return redis.error_reply('WRONGTYPE lock key holds a ' .. t .. ', not a reentrant dlock lock')
end
local n = tonumber(redis.call('hget', key, owner))
if n then
  if tonumber(seq) <= (tonumber(redis.call('hget', key, fs)) or 0) then
    return {0, redis.call('pttl', key)}
  end
  local fence = 0
  if fk then
    local e = bad_fence(fk)
    if e then return e end
    fence = tonumber(redis.call('get', fk) or '0')
  end
  redis.call('hset', key, owner, n + 1, fs, seq, fu, seq)
  -- Never shorter: another handle of the owner may count on a longer TTL.
  if redis.call('pttl', key) < tonumber(ttl) then redis.call('pexpire', key, ttl) end
  if delay_mark then delay_mark(owner, redis.call('pttl', key)) end
  if id then redis.pcall('zrem', wq, id) end
  return {1, fence, n + 1}
end
-- The owner id: the one field without '#' (the others are bookkeeping).
local function holder()
  for _, f in ipairs(redis.call('hkeys', key)) do
    if not string.find(f, '#', 1, true) then return f end
  end
  return ''
end
-- Held by another owner. The waiter list's functions are made only on
-- this way: the grants above do without them (a closure each per call,
-- issue 20), and nothing is written before here on it.
--#include waitq.lua
if id then wq_note(wq, id, ARGV[6]) end
return {0, redis.call('pttl', key), holder()}
