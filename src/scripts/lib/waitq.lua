-- SPDX-License-Identifier: BSD-3-Clause
-- waitq.lua: shared prelude, joined at build time (cmake/embed_scripts.cmake)
-- into the scripts that keep or read a lock's waiter list (KEY NUL "wq",
-- src/keys.c; docs/waiting.md, "Who is woken").
--
-- The list is a sorted set: member = a waiting acquire's wait id, score =
-- the server time (ms) at which the entry lapses unless the waiter looks
-- again. A release wakes the live entry that lapses first (the waiter that
-- has gone longest without a look) instead of every subscriber. It is a
-- hint only: nothing here decides who gets the lock (a free lock is free
-- for everyone), everything is done with pcall after the script's own
-- checks and writes, TIME included, so a list in a bad state (a foreign
-- key of another type) or an ACL user without these commands costs
-- wake-ups (everyone is woken, as before), never an acquire or a release.
--
-- TIME before a write needs effects replication. It is the default since
-- Redis 5, but Redis 5 and 6 can be set to `lua-replicate-commands no`, and
-- then only this call keeps the writes after TIME legal (a no-op on 7; as
-- in zlease.lua). Every script including this does so before its writes.
if redis.replicate_commands then redis.replicate_commands() end

-- The server's clock in ms, or nil when TIME is refused.
local function wq_now_ms()
  local t = redis.pcall('time')
  if type(t) ~= 'table' or not t[2] then return nil end
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Note (or refresh) a waiter; the key lives as long as its newest entry.
local function wq_note(wq, id, ttl_ms)
  local now, ms = wq_now_ms(), tonumber(ttl_ms)
  if not now or not ms then return end
  redis.pcall('zadd', wq, now + ms, id)
  redis.pcall('pexpire', wq, ms)
end

-- Drop lapsed entries and take out the live one that lapses first: the
-- waiter to wake. nil when nobody is listed (or the list is unusable).
local function wq_pop(wq)
  -- Nobody listed (every uncontended release): one EXISTS instead of
  -- TIME + ZREMRANGEBYSCORE + ZRANGE.
  if redis.pcall('exists', wq) ~= 1 then return nil end
  local now = wq_now_ms()
  if not now then return nil end
  redis.pcall('zremrangebyscore', wq, '-inf', '(' .. now)
  local r = redis.pcall('zrange', wq, 0, 0)
  if type(r) ~= 'table' or not r[1] then return nil end
  redis.pcall('zrem', wq, r[1])
  return r[1]
end

-- A release's wake-up (needs wake.lua first): "w ID" for the listed
-- waiter that lapses first, or "r" (everyone) when nobody is listed or no
-- list is given. Waiters of older dlock versions wake on any message.
local function wake_next(ch, wq)
  local id = wq and wq_pop(wq)
  if id then return wake(ch, 'w ' .. id) end
  return wake(ch, 'r')
end
