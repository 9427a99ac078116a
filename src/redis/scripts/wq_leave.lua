-- SPDX-License-Identifier: BSD-3-Clause
-- wq_leave.lua: a listed waiter gives up (deadline or cancel) and leaves
-- the lock's waiter list (lib/waitq.lua) without leaving anyone stuck.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's waiter list
-- KEYS[3]  (plain locks) the lock's run
-- ARGV[1]  the waiter's wait id
-- ARGV[2]  the lock's pub/sub channel
--
-- Replies  1   a turn was handed to this waiter and is passed on
--          0   left the list
--
-- What a bare ZREM left behind: a turn given to the leaver (the key holds
-- "turn:ID" until it lapses, while everyone else sleeps on), and a head
-- that had been told when the holder's run ends (the waiter behind it was
-- not, and would sleep until its 200 ms look should the holder leave
-- within its run). The turn is deleted and the next head woken as a
-- release would (wake_next); a leaving head with a run on wakes the new
-- head, which then learns the run's end. Nothing here can fail after a
-- write: the key is only touched when it holds our turn (a string).
--#include wake.lua
--#include wake_to.lua
--#include waitq.lua
local id, ch = ARGV[1], ARGV[2]
local head = wq_head(KEYS[2])
redis.pcall('zrem', KEYS[2], id)
local v = redis.pcall('get', KEYS[1])
if v == 'turn:' .. id then
  redis.call('del', KEYS[1])
  wake_next(ch, KEYS[2])
  return 1
end
if head == id and KEYS[3] then
  local who = wq_run(KEYS[3])
  local nh = who and wq_head(KEYS[2])
  if nh then wake_to(ch, nh, 'w ' .. nh) end
end
return 0
