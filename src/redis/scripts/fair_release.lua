-- SPDX-License-Identifier: BSD-3-Clause
-- fair_release.lua: release a fair lock and hand it straight to the next
-- live waiter, so the next holder needs no round trip to take it.
--
-- KEYS[1]  the lock key;  KEYS[2]  the queue
-- KEYS[3]  (optional) the fencing counter
-- ARGV[1]  our token;  ARGV[2]  the wake-up channel
-- ARGV[3]  liveness key prefix (see fair_acquire.lua)
-- and, last, the holder identity's key and argument (lib/ident.lua): our
-- identity goes; a hand-over writes the next holder's, from the text its
-- waiter left beside its liveness key (fair_acquire.lua), with the
-- claim's TTL and the hand-over's "since"
--
-- Replies  2   released and handed over: the lock now holds the next
--              waiter's token with a claim lease (the rest of its liveness
--              TTL plus one refresh period, a third of that TTL), the
--              fencing counter went up, and "g TOKEN FENCE" was published;
--              the waiter takes the lock on that message, and its full TTL
--              is set later by a renewal (or by its next fair_acquire.lua
--              call, if it looks first). A waiter that died without leaving
--              lets the claim lapse within seconds (issue 15).
--          1   released; nobody waits ("r" published)
--          0   the key was gone (the lease had expired)
--          -1  the key holds another owner's token; left untouched
--          error WRONGTYPE when the lock key is not a string, the queue
--                not a list, or the fencing counter not a counter
--
-- Invariant: only our own lock is released; it is handed to the longest
-- waiting live waiter only, in one atomic step with the release. Every
-- check that can fail runs before the first write (Redis keeps what a
-- script wrote before an error): a liveness key that is not a number
-- counts as a dead waiter rather than failing half-way. The wake-up is
-- best effort (pcall), as in release.lua; a waiter that gets no message
-- finds a hand-over at its next look (every refresh period).
--#include wake.lua
--#include wake_to.lua
--#include ident.lua
--#include delay.lua
local lock, q = KEYS[1], KEYS[2]
local tok, ch, wprefix = ARGV[1], ARGV[2], ARGV[3]

--#include bad_fence.lua

local v = redis.call('get', lock)
if v ~= tok then
  if not v then return 0 end
  return -1
end
local qt = redis.call('type', q).ok
if qt ~= 'none' and qt ~= 'list' then
  return redis.error_reply('WRONGTYPE the waiting line of this lock holds a ' .. qt .. ', not a list; nothing written')
end
if #KEYS > 2 then
  local e = bad_fence(KEYS[3])
  if e then return e end
end
redis.call('del', lock)
if ident_key then redis.pcall('del', ident_key) end
if delay_clear then delay_clear(tok) end
local h = redis.call('lpop', q)
while h do
  local wk = wprefix .. h
  local live = nil
  if redis.call('type', wk).ok == 'string' then live = tonumber(redis.call('get', wk)) end
  if live then
    local claim = redis.call('pttl', wk) + math.floor(live / 3)
    if claim < 1 then claim = 1 end
    redis.call('del', wk)
    redis.call('set', lock, h, 'PX', claim)
    if delay_mark then delay_mark(h, claim) end
    local f = 0
    if #KEYS > 2 then f = redis.call('incr', KEYS[3]) end
    if ident_key then
      local text = redis.pcall('get', wk .. '\0id')
      if type(text) == 'string' then
        redis.pcall('del', wk .. '\0id')
        ident_write(h, text, claim, true)
      end
    end
    wake_to(ch, h, 'g ' .. h .. ' ' .. f)
    return 2
  end
  h = redis.call('lpop', q)
end
wake(ch, 'r')
return 1
