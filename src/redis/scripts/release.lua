-- SPDX-License-Identifier: BSD-3-Clause
-- release.lua: delete a plain lock only if it still holds our token, and
-- wake whoever waits for it.
--
-- KEYS[1]  the lock key
-- KEYS[2]  (optional) the lock's waiter list (lib/waitq.lua)
-- KEYS[3]  (optional, with ARGV[3]) the lock's run (lib/waitq.lua)
-- ARGV[1]  our owner token
-- ARGV[2]  pub/sub channel to notify waiters on, or '' for none
-- ARGV[3]  (plain locks) our handle's run id
-- ARGV[4]  (with ARGV[3]) how long a run lasts, in us
-- ARGV[5]  (with ARGV[3]) how long a turn lasts, in ms
-- and, last, the holder identity's key and argument (lib/ident.lua): the
-- hash goes with the hold (also when a turn replaces the key)
--
-- Replies  1   released (the key held our token and is deleted)
--          0   the key was gone (the lease had expired or was deleted)
--          -1  the key holds another owner's token; left untouched
--          error WRONGTYPE when the key is not a string
--
-- Invariant: never deletes a lock someone else owns: compare and delete are
-- one atomic step. The wake-up is best effort (pcall): a user without
-- channel rights (ACL resetchannels) gets PUBLISH refused after the delete,
-- and the reply must still say "released"; its waiters poll instead.
-- With a waiter list the message is "w ID": only the listed waiter that
-- has waited longest wakes (no thundering herd); with nobody listed it is
-- "r". With a run (plain locks), a release within the releaser's run wakes
-- nobody, and the one that ends the run leaves the key to the head of the
-- line as "turn:ID" for ARGV[5] ms and wakes it (lib/waitq.lua).
--#include ident.lua
--#include delay.lua
--#include wake.lua
local v = redis.call('get', KEYS[1])
if v ~= ARGV[1] then
  if not v then return 0 end
  return -1
end
if ident_key then redis.call('del', ident_key) end
if delay_clear then delay_clear(ARGV[1]) end
-- Nobody listed (no list, or an empty one): delete, and wake everyone
-- unless there is no channel. Done before the waiter list's functions are
-- even made, which costs about 1 us a call in closures (issue 20).
if ARGV[2] == '' or not KEYS[2] or redis.pcall('exists', KEYS[2]) ~= 1 then
  redis.call('del', KEYS[1])
  if ARGV[2] ~= '' then wake(ARGV[2], 'r') end
  return 1
end
--#include wake_to.lua
--#include waitq.lua
if not ARGV[3] then
  redis.call('del', KEYS[1])
  wake_next(ARGV[2], KEYS[2])
  return 1
end
local turn = wq_release(ARGV[2], KEYS[2], KEYS[3], ARGV[3], ARGV[4])
if turn then
  redis.call('set', KEYS[1], 'turn:' .. turn, 'PX', ARGV[5])
  wake_to(ARGV[2], turn, 'w ' .. turn)
else
  redis.call('del', KEYS[1])
end
return 1
