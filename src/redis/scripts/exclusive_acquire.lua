-- SPDX-License-Identifier: BSD-3-Clause
-- exclusive_acquire.lua: take the exclusive side of a read-write lock. The
-- held lock is exactly a plain lock (a string with our token, PX TTL), so
-- release, extend, renewal and fencing are the plain scripts'; what differs
-- is that shared holders (a sorted set, zlease.lua) keep us out, and that a
-- writer kept out leaves a short "writer waiting" mark that new shared
-- holders respect (writer preference, docs/primitives.md).
--
-- KEYS[1]  the lock key
-- KEYS[2]  (optional) the fencing counter, when #KEYS == 3
-- KEYS[#KEYS]  the writer-waiting mark, KEY NUL "ww"
-- ARGV[1]  our owner token
-- ARGV[2]  TTL in ms, > 0
-- ARGV[3]  how long the mark lasts, ms (longer than a waiter's longest
--          sleep between two attempts, which refresh it); 0 for a writer
--          that tries once and does not wait: it leaves no mark
-- ARGV[4]  (reentrant writers only) OWNER#: the prefix of every token of
--          this owner (client x thread). The owner already holding the
--          name through another handle (writer, or a share: an upgrade)
--          is refused, {-2}: it would wait for itself
-- ARGV[#ARGV-1], ARGV[#ARGV]  (a subscribed waiter: 5 arguments, or 6 with
--          ARGV[4]) its wait id and how long its entry lives, ms; then the
--          last key is the lock's waiter list (lib/waitq.lua), after the
--          mark, as in acquire.lua
-- and, last, the holder identity's key and argument (lib/ident.lua)
--
-- Replies  {1, fence}         granted (fence 0 without a counter)
--          {0, pttl, holder}  held: by another exclusive owner (its token),
--                             or by shared holders (holder '', the TTL of
--                             the last lease)
--          {-2, 0}            (with ARGV[4]) the owner holds it already
--          error WRONGTYPE    another type, a semaphore, a sorted set without
--                             a TTL (not ours), or a bad counter
--
-- Invariant: as acquire.lua, and never granted while a live shared lease
-- exists (the key exists as long as its last lease). Checks before writes.
-- A writer waiting on a name that plain locks use too may be handed a turn
-- ("turn:ID", acquire.lua) and takes it like a free key.
--#include ident.lua
--#include delay.lua
--#include bad_fence.lua
--#include zlease.lua
local id = #ARGV >= 5 and ARGV[#ARGV - 1] or nil
local nk = #KEYS - (id and 1 or 0)
local wq = id and KEYS[#KEYS]
local key, mark = KEYS[1], KEYS[nk]
local own = (#ARGV == 4 or #ARGV == 6) and ARGV[4] or nil
local t = redis.call('type', key).ok
-- Every sorted set dlock writes has a TTL (its last lease's end): one
-- without is not a lock of ours, and waiting for it would never end.
if t == 'zset' and redis.call('pttl', key) < 0 then
  return redis.error_reply('WRONGTYPE lock key holds a sorted set without a TTL, not a lock')
end
-- A plain holder's run ended with this waiter's turn (lib/waitq.lua): the
-- string is a reservation for us, not a holder (no share can exist).
if id and t == 'string' and redis.call('get', key) == 'turn:' .. id then t = 'none' end
local function ours(m) return own and string.sub(m, 1, #own) == own end
if own and t == 'string' and ours(redis.call('get', key)) then return {-2, 0} end
if own and t == 'zset' then
  local now = zlease_now()
  for _, m in ipairs(redis.call('zrangebyscore', key, '(' .. now, '(inf')) do
    if ours(m) then return {-2, 0} end
  end
end
if t == 'none' then
  if nk == 3 then
    local e = bad_fence(KEYS[2])
    if e then return e end
  end
  if delay_left then -- a lock-delay (delay.lua): no live hold, so every mark counts
    local ms = delay_left()
    if ms > 0 then return delay_refused(ms) end
  end
  redis.call('set', key, ARGV[1], 'PX', ARGV[2])
  if ident_grant then ident_grant(ARGV[1], ARGV[2]) end
  if delay_mark then delay_mark(ARGV[1], ARGV[2]) end
  redis.call('del', mark)
  local fence = 0
  if nk == 3 then fence = redis.call('incr', KEYS[2]) end
  if id then redis.pcall('zrem', wq, id) end
  return {1, fence}
end
-- Kept out. The waiter list's functions are made only on these ways: a
-- grant does without them (a closure each per call, issue 20). Nothing is
-- written before this point.
--#include waitq.lua
if t == 'string' then
  if id then wq_note(wq, id, ARGV[#ARGV]) end
  return {0, redis.call('pttl', key), redis.call('get', key)}
end
if t == 'zset' and #redis.call('zrangebyscore', key, '+inf', '+inf', 'LIMIT', 0, 1) == 0 then
  if tonumber(ARGV[3]) > 0 then redis.call('set', mark, ARGV[1], 'PX', ARGV[3]) end
  if id then wq_note(wq, id, ARGV[#ARGV]) end
  return {0, redis.call('pttl', key), ''}
end
return redis.error_reply('WRONGTYPE lock key holds a ' ..
                         (t == 'zset' and 'semaphore' or t) .. ', not a read-write lock')
