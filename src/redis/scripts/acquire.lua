-- SPDX-License-Identifier: BSD-3-Clause
-- acquire.lua: take a plain lock (a string value with a PX TTL), the same
-- shape redsync, go-zero, node-redlock and redis-py use, so all of them
-- exclude each other on one key.
--
-- KEYS[1]  the lock key
-- KEYS[2]  (optional) the fencing counter of this lock name
-- ARGV[1]  our owner token (128 random bits, hex)
-- ARGV[2]  TTL in ms, > 0 (the client never sends 0 or less)
-- ARGV[3]  (optional) a subscribed waiter's wait id: then the last two
--          keys are the lock's waiter list and its run (lib/waitq.lua),
--          and KEYS[2] is the fencing counter only when there are four keys
-- ARGV[4]  (with ARGV[3]) how long the waiter list lives past this look, ms
-- ARGV[5]  (with ARGV[3]) our handle's run id
-- ARGV[6]  (with ARGV[3]) how long a run lasts, in us
-- ARGV[7]  (with ARGV[3]) the lock's pub/sub channel
-- and, last, the holder identity's key and argument (lib/ident.lua)
--
-- Replies  fence       granted (an integer reply); fence = the counter after
--                      INCR (0 if no counter key was given)
--          {0, pttl, holder, look}
--                      held by another owner; pttl = its remaining ms
--                      (-1: a key without TTL, which dlock never makes),
--                      holder = its token (lets a Redlock waiter tell one
--                      holder on a majority from a split vote), look = when
--                      this waiter should look again although nobody
--                      publishes (the head of the line, at the end of the
--                      holder's run), in ms, or -1 (on a release message)
--          error WRONGTYPE when the key holds something else than a string,
--                or the fencing counter is not a counter (another type, or
--                a string that is not a decimal below 2^53)
--
-- Invariant: the key is only ever written when absent, so a live lock is
-- never overwritten; the fencing counter only grows, and only on a grant,
-- in the same atomic step as the grant. Every check that can fail runs
-- before the first write: Redis keeps what a script wrote before an error,
-- so an INCR failing after the SET would leave a lock nobody holds.
--
-- A subscribed waiter is noted in the waiter list when it finds the lock
-- held (after the type check: a failing script writes nothing) and taken
-- off when granted, so a release wakes one listed waiter, not all. The
-- list never decides a grant of a free lock: that is anyone's. A release
-- that ends a run hands the lock to the head of the line: the key holds
-- "turn:ID" for a short time, and only the acquire with that wait id may
-- replace it (anyone else, and any other library, sees a held lock).

-- Cost (issue 20): this runs once per acquisition, so it does what it
-- must in as few commands as it can, with the commands the documented
-- ACL user has (docs/design.md; no MGET, so that an upgrade keeps working
-- for such users). One GET reads the lock (pcall: a key of another type
-- is the error below, before any write); a grant then takes the counter's
-- GET, SET and INCR, a busy lock PTTL: 4 commands and 2, where EXISTS,
-- TYPE, GET, SET, INCR took 5 and EXISTS, TYPE, PTTL, GET 4. A grant
-- answers with a bare integer, which Redis converts at a fraction of a
-- table's cost. A caller that is not a listed waiter returns before the
-- waiter list's functions are made (a closure each, per call: with the
-- release's short path, about 1 us of the server's 4.9 per call, measured
-- with INFO commandstats); the list's own commands (a subscribed waiter only)
-- come after the checks, under pcall.

--#include ident.lua
--#include delay.lua
--#include bad_fence.lua

-- The grant, checks first: the fence (0 without a counter), or nil and the
-- error reply.
local function grant(fk)
  if fk then
    local e = bad_fence(fk)
    if e then return nil, e end
  end
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  if ident_grant then ident_grant(ARGV[1], ARGV[2]) end
  if delay_mark then delay_mark(ARGV[1], ARGV[2]) end
  return fk and redis.call('incr', fk) or 0
end

local id = ARGV[3]
local fk = (#KEYS - (id and 2 or 0)) > 1 and KEYS[2]
local v = redis.pcall('get', KEYS[1])
if type(v) == 'table' then
  return redis.error_reply('WRONGTYPE lock key holds a ' .. redis.call('type', KEYS[1]).ok ..
                           ', not a plain dlock lock')
end
-- A free key may still be under a lock-delay (delay.lua): refused, and a
-- listed waiter is not listed (nobody will publish the delay's end).
if not v and delay_left then
  local ms = delay_left()
  if ms > 0 then return delay_refused(ms) end
end
-- Not a listed waiter (every first try, and every call of a try-once):
-- done before the waiter list's functions are even made, which costs
-- about 1 us a call in closures (issue 20).
if not id then
  if v then return {0, redis.call('pttl', KEYS[1]), v, -1} end
  local fence, e = grant(fk)
  return e or fence
end

--#include wake.lua
--#include wake_to.lua
--#include waitq.lua
local wq, wr = KEYS[#KEYS - 1], KEYS[#KEYS]
local turn = v == 'turn:' .. id
if v and not turn then
  return {0, redis.call('pttl', KEYS[1]), v, wq_busy(wq, wr, id, ARGV[4])}
end
local fence, e = grant(fk)
if e then return e end
redis.pcall('zrem', wq, id)
if turn then wq_turn_taken(wq, wr, ARGV[5], ARGV[6], ARGV[7]) end
return fence
