-- SPDX-License-Identifier: BSD-3-Clause
-- waitq.lua: shared prelude, joined at build time (cmake/embed_scripts.cmake)
-- into the scripts that keep or read a lock's waiter list (KEY NUL "wq",
-- src/redis/keys.c; docs/waiting.md, "Who is woken").
--
-- The list is a sorted set: member = a waiting acquire's wait id, score =
-- the server time (us) at which it first found the lock held. A later look
-- keeps that place (ZADD NX), so the list is in arrival order, and a
-- release wakes its head, the waiter that has waited longest, instead of
-- every subscriber. An entry leaves when its waiter is granted, gives up
-- (ZREM), or is woken by a release; the key itself lapses a few looks after
-- the newest note, so a dead waiter's entry goes with it, or is skipped
-- when a release wakes it (it never answers). It is a hint only: nothing
-- here decides who gets a free lock, everything is done with pcall after
-- the script's own checks and writes, TIME included, so a list in a bad
-- state (a foreign key of another type) or an ACL user without these
-- commands costs wake-ups (everyone is woken, as before), never an acquire
-- or a release.
--
-- The functions that wake someone (wake_next, wq_turn_taken, wq_release)
-- call wake and wake_to: a script that calls them includes wake.lua and
-- wake_to.lua first. exclusive_acquire.lua and reentrant_acquire.lua only
-- note waiters (wq_note) and include neither, saving their closures.
--
-- Runs and turns (plain locks; docs/waiting.md, "Runs and turns"): KEY NUL
-- "wr" holds "RUNID END WOKEN PLACE": the holder handle RUNID keeps a
-- contended lock for itself until END (server us), so a process that
-- releases and takes the lock again at once wakes nobody per section;
-- WOKEN (or "-") is the waiter the run's first release woke, with its
-- PLACE in line, which it keeps if it finds the lock taken back. The first
-- release after END hands the lock to the head of the line: the lock key
-- holds "turn:ID" for a few ms, which only that waiter's acquire replaces
-- (every other acquire, and any other library's SET NX, sees a held lock).

-- TIME before a write needs effects replication. It is the default since
-- Redis 5, but Redis 5 and 6 can be set to `lua-replicate-commands no`, and
-- then only this call keeps the writes after TIME legal (a no-op on 7; as
-- in zlease.lua). Every script including this does so before its writes.
if redis.replicate_commands then redis.replicate_commands() end

-- The server's clock in us, or nil when TIME is refused.
local function wq_now_us()
  local t = redis.pcall('time')
  if type(t) ~= 'table' or not t[2] then return nil end
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Note a waiter: a first look takes the back of the line, a later one
-- keeps its place; the key lives ttl_ms past the newest note.
local function wq_note(wq, id, ttl_ms)
  local now, ms = wq_now_us(), tonumber(ttl_ms)
  if not now or not ms then return end
  redis.pcall('zadd', wq, 'NX', now, id)
  redis.pcall('pexpire', wq, ms)
end

-- The head of the line and its place (score), or nil when nobody is
-- listed (or the list is unusable). Every uncontended release asks: one
-- EXISTS first instead of ZRANGE on a missing key.
local function wq_head(wq)
  if redis.pcall('exists', wq) ~= 1 then return nil end
  local r = redis.pcall('zrange', wq, 0, 0, 'WITHSCORES')
  if type(r) ~= 'table' or not r[1] then return nil end
  return r[1], r[2]
end

-- Take out the head: the waiter to wake.
local function wq_pop(wq)
  local id = wq_head(wq)
  if id then redis.pcall('zrem', wq, id) end
  return id
end

-- A release's wake-up (needs wake.lua first): "w ID" for the head of the
-- line, taken out of it, or "r" (everyone) when nobody is listed or no
-- list is given. Waiters of older dlock versions wake on any message.
local function wake_next(ch, wq)
  local id = wq and wq_pop(wq)
  if id then return wake_to(ch, id, 'w ' .. id) end
  return wake(ch, 'r')
end

-- The run in wr: its holder handle, its end (us), and the waiter its first
-- release woke with that waiter's place in line, or nil.
local function wq_run(wr)
  local s = redis.pcall('get', wr)
  if type(s) ~= 'string' then return nil end
  local who, e, id, score = string.match(s, '^(%S+) (%d+) (%S+) (%S+)$')
  return who, tonumber(e), id, tonumber(score)
end

-- A turn was taken (acquire.lua, needs wake.lua first): the run of holder
-- handle me starts, budget_us long, and the new head of the line is woken
-- to learn when it ends (wq_busy): should the holder leave within its run,
-- whose releases wake nobody, the head looks then.
local function wq_turn_taken(wq, wr, me, budget_us, ch)
  local now, b = wq_now_us(), tonumber(budget_us)
  if not now or not b or not me then return end
  redis.pcall('set', wr, string.format('%s %.0f - -', me, now + b), 'PX', 2000)
  local head = ch and wq_head(wq)
  if head then wake_to(ch, head, 'w ' .. head) end
end

-- A plain lock's release with a list and a run (release.lua; the caller
-- has deleted the lock). Returns the waiter to hand the lock to (its turn),
-- or nil after it woke whoever needs it:
--  * nobody listed: "r" (everyone), as wake_next;
--  * the releaser's run goes on: nobody (it is about to take the lock
--    again, or the head looks at the run's end: acquire.lua's hint);
--  * no run of the releaser's yet: it starts one, and the head is woken
--    without a turn: it tries, and if the releaser took the lock back, it
--    is listed again in its old place (kept in the run) and learns when the
--    run ends; a dead head is gone from the line for good;
--  * the run is over: the head is taken out and gets the turn (and keeps
--    its place should it come too late for it).
local function wq_release(ch, wq, wr, me, budget_us)
  local head, place = wq_head(wq)
  if not head then
    wake(ch, 'r')
    return nil
  end
  local now, b = wq_now_us(), tonumber(budget_us)
  if not now or not b then
    wake_next(ch, wq)
    return nil
  end
  local who, e = wq_run(wr)
  -- A run ending more than a second away means the server's clock stepped
  -- back: it is over.
  if who == me and now < e and e - now <= math.max(b, 1000000) then return nil end
  -- An entry of an older dlock (its score is a lapse time in ms, which
  -- sorts first) cannot take a turn: it is woken the old way.
  if (tonumber(place) or 0) < 1e14 then
    wake_next(ch, wq)
    return nil
  end
  if who ~= me then
    redis.pcall('zrem', wq, head)
    redis.pcall('set', wr, string.format('%s %.0f %s %s', me, now + b, head, place), 'PX', 2000)
    wake_to(ch, head, 'w ' .. head)
    return nil
  end
  -- No run until the head takes its turn; should it come after the turn
  -- lapsed and find the lock taken, it keeps its place (wq_busy). The next
  -- in line is woken too: it sees the turn's few ms left and looks when the
  -- turn ends, so a head that died costs the others the turn, not their
  -- 200 ms look.
  redis.pcall('zrem', wq, head)
  redis.pcall('set', wr, string.format('- 0 %s %s', head, place), 'PX', 2000)
  local second = wq_head(wq)
  if second then wake_to(ch, second, 'w ' .. second) end
  return head
end

-- A subscribed waiter found a plain lock held (acquire.lua): note it as
-- wq_note does, in its old place if a run's first release woke it, and
-- say when it should look again although nobody publishes: the head of the
-- line at the end of the holder's run (the holder may have left for good,
-- and its releases within the run wake nobody), in ms; -1 for everyone
-- else, and for the head when no run is on (a release wakes it).
local function wq_busy(wq, wr, id, ttl_ms)
  local now, ms = wq_now_us(), tonumber(ttl_ms)
  if not now or not ms then return -1 end
  local who, e, woke, score = wq_run(wr)
  if woke ~= id or not score then score = now end
  redis.pcall('zadd', wq, 'NX', score, id)
  redis.pcall('pexpire', wq, ms)
  if not who or e <= now or wq_head(wq) ~= id then return -1 end
  return math.ceil(math.min(e - now, 1000000) / 1000)
end
