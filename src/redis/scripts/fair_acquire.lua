-- SPDX-License-Identifier: BSD-3-Clause
-- fair_acquire.lua: take a lock in arrival order, or wait in line.
--
-- The queue is a list of waiter tokens (KEYS[2]). Every waiter also has a
-- liveness key ARGV[4]..token holding its liveness TTL, with a PX expiry of
-- ARGV[3] ms that the waiter refreshes each time it calls this script; a
-- waiter that crashed stops refreshing, its liveness key expires, and the
-- queue skips it. All keys share the lock name's hash tag.
--
-- A hand-over (fair_release.lua) gives the next waiter only a short claim
-- lease. The waiter takes the lock on the release's message and its
-- watchdog sets the full TTL later (src/redis/fair.c); a waiter that looks
-- before it took the message confirms the claim here instead. A waiter
-- killed after its last refresh therefore holds the line up for its
-- liveness TTL plus one refresh period at most, never a full TTL.
--
-- KEYS[1]  the lock key (a plain string lock, as acquire.lua)
-- KEYS[2]  the queue (list of tokens, head = next in line)
-- KEYS[3]  our liveness key (= ARGV[4] .. ARGV[1])
-- KEYS[4]  (optional) the fencing counter
-- ARGV[1]  our token;  ARGV[2]  lock TTL in ms (> 0)
-- ARGV[3]  liveness TTL in ms; '0' = try once: do not join the line
-- ARGV[4]  liveness key prefix
-- and, last, the holder identity's key and argument (lib/ident.lua): a
-- grant writes our identity; a waiter keeps its text in the key KEYS[3]
-- NUL "id", beside its liveness key and with the same PX, for the release
-- that hands it the lock (fair_release.lua); a confirmed hand-over keeps
-- the identity the release wrote (or writes ours, if that release kept
-- none) and gives it the lock's TTL
--
-- Replies  {1, fence}  we hold the lock: taken now (the lock was free and no
--                      live waiter was ahead of us), or handed to us by
--                      fair_release.lua since our last call
--          {0, pttl, false, -1, joined}
--                      we wait in line; pttl = the holder's remaining ms,
--                      or -2 when the lock is free but a live waiter is ahead;
--                      joined = 1 if this call put us in the line (the first
--                      call, or our place was lost: a hand-over to us that
--                      lapsed, or we counted as gone), else 0
--          {0, pttl}   try once (ARGV[3] = '0'): held, or a live waiter ahead
--          error WRONGTYPE when the lock key is not a string, the queue
--                not a list, or the fencing counter not a counter
--
-- Invariant: while a live waiter is ahead of us, we never take a free lock;
-- the lock key is only written when absent. Every check that can fail runs
-- before the first write (Redis keeps what a script wrote before an error).
--#include ident.lua
--#include delay.lua
local lock, q, me = KEYS[1], KEYS[2], KEYS[3]
local tok, ttl, wttl, wprefix = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

--#include bad_fence.lua

local v = redis.call('get', lock)
local qt = redis.call('type', q).ok
if qt ~= 'none' and qt ~= 'list' then
  return redis.error_reply('WRONGTYPE the waiting line of this lock holds a ' .. qt .. ', not a list; nothing written')
end
if v == tok then
  -- handed over to us by a release since our last call: confirm the claim
  -- (the read that can fail first)
  local f = 0
  if #KEYS > 3 then f = tonumber(redis.call('get', KEYS[4]) or '0') or 0 end
  redis.call('del', me)
  redis.call('pexpire', lock, ttl)
  if delay_mark then delay_mark(tok, ttl) end
  if ident_key then
    redis.pcall('del', me .. '\0id')
    if redis.pcall('hexists', ident_key, tok) == 1 then
      redis.pcall('pexpire', ident_key, ttl)
    else
      ident_grant(tok, ttl)
    end
  end
  return {1, f}
end
if #KEYS > 3 then
  local e = bad_fence(KEYS[4])
  if e then return e end
end
-- A free lock under a lock-delay (delay.lua) is nobody's yet: we keep
-- our place in line and look again when the delay ends.
local delayed = 0
if not v and delay_left then delayed = delay_left() end
if not v and delayed == 0 then
  -- skip waiters ahead of us that are gone
  local h = redis.call('lindex', q, 0)
  while h and h ~= tok and redis.call('exists', wprefix .. h) == 0 do
    redis.call('lpop', q)
    h = redis.call('lindex', q, 0)
  end
  if not h or h == tok then
    if h then redis.call('lpop', q) end
    redis.call('del', me)
    redis.call('set', lock, tok, 'PX', ttl)
    if delay_mark then delay_mark(tok, ttl) end
    local f = 0
    if #KEYS > 3 then f = redis.call('incr', KEYS[4]) end
    if ident_key then
      redis.pcall('del', me .. '\0id')
      ident_grant(tok, ttl)
    end
    return {1, f}
  end
end
if wttl == '0' then
  if delayed > 0 then return delay_refused(delayed) end
  return {0, redis.call('pttl', lock)}
end
local joined = 0
if not redis.call('lpos', q, tok) then
  redis.call('rpush', q, tok)
  joined = 1
end
redis.call('set', me, wttl, 'PX', wttl)
if ident_key then redis.pcall('set', me .. '\0id', ident_text, 'PX', wttl) end
if delayed > 0 then return {0, delayed, false, -1, joined, 1} end
return {0, redis.call('pttl', lock), false, -1, joined}
