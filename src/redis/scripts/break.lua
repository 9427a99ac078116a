-- SPDX-License-Identifier: BSD-3-Clause
-- break.lua: remove every hold of a lock, whoever holds it (dlock break,
-- dlock_client_break()), for a holder that is gone for good.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter of this lock name
-- KEYS[3]  (optional) the lock's holder identity hash (lib/ident.lua),
--          removed with the holds
-- ARGV[1]  the lock's wake-up channel, or '' for none
-- ARGV[2]  the fence the caller looked at, or '0': break only if no grant
--          came since (the counter is not above it)
-- ARGV[3]  (optional) 'check': say what would be removed, remove nothing
--
-- Replies  {removed, mode, fence}: removed the holds taken away (0: no
--          hold was there; 1 for a plain, fair, exclusive or reentrant
--          lock; the live holders of a shared lock or a semaphore; -1:
--          refused, the counter is above ARGV[2]); mode as holders.lua's (0
--          free, 1 a string, 2 shared, 3 semaphore, 4 reentrant); fence the
--          counter (0 if none yet, or if it is not a counter)
--          error WRONGTYPE when the key is not a lock dlock writes (a
--          list, a set, a stream, or a hash or sorted set without a TTL):
--          nothing is removed
--
-- Invariant: only the holds go. The fencing counter stays, so the next
-- grant's fence is larger than every fence given before; the waiter list,
-- the fair queue, a waiting writer's mark and a waiter's turn ("turn:ID",
-- lib/waitq.lua: the lock handed to the head of the line, not yet taken)
-- stay, so waiters keep their places. Every waiter is woken ('r', as a
-- release with nobody listed) to look at once. A broken holder finds its
-- token gone at its next renewal, extend or release, and its handle
-- reports the lock lost.
--#include wake.lua
if redis.replicate_commands then redis.replicate_commands() end -- TIME, then DEL
local key = KEYS[1]
local f = redis.pcall('get', KEYS[2])
local fence = type(f) == 'string' and tonumber(f) or 0
local t = redis.call('type', key).ok
if t == 'none' then return {0, 0, fence} end
local removed, mode = 1, 1
if t == 'string' then
  if string.sub(redis.call('get', key), 1, 5) == 'turn:' then return {0, 0, fence} end
else
  if (t ~= 'zset' and t ~= 'hash') or redis.call('pttl', key) < 0 then
    return redis.error_reply('WRONGTYPE the lock key holds a ' .. t .. ', not a dlock lock')
  end
  if t == 'hash' then
    mode = 4
  else
    mode = 2
    if #redis.call('zrangebyscore', key, '+inf', '+inf', 'LIMIT', 0, 1) > 0 then mode = 3 end
    local tm = redis.call('time')
    local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
    removed = redis.call('zcount', key, '(' .. now, '(inf')
  end
end
local want = tonumber(ARGV[2]) or 0
if want > 0 and fence > want then return {-1, mode, fence} end
if ARGV[3] == 'check' then return {removed, mode, fence} end
redis.call('del', key)
if KEYS[3] then redis.call('del', KEYS[3]) end
if ARGV[1] ~= '' then wake(ARGV[1], 'r') end
return {removed, mode, fence}
