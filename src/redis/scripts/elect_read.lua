-- SPDX-License-Identifier: BSD-3-Clause
-- elect_read.lua: an election's leader, its fence and value
-- (dlock_election_leader(), dlock_election_observe(); src/redis/elect.c).
-- Read-only.
--
-- KEYS[1]  the election's lock key;  KEYS[2]  its fencing counter
-- KEYS[3]  the value hash (elect_write.lua)
--
-- Replies  {0}                      nobody leads (the lock is free)
--          {1, pttl, fence}         a leader holds the lock but has not
--                                   written its value yet (a term's first
--                                   moments, or a holder that is no
--                                   candidate): shown as no leader
--          {2, pttl, fence, value}  the leader and its value
--
-- Invariant: the value is shown only when it is stamped with the current
-- holder's token and the fence its grant took (the counter, which only a
-- grant raises): never an earlier term's value beside a new term's fence.
local tok = redis.call('get', KEYS[1])
if not tok then return {0} end
local pttl = redis.call('pttl', KEYS[1])
local fence = tonumber(redis.call('get', KEYS[2]) or '0') or 0
if redis.call('type', KEYS[3]).ok ~= 'hash' then return {1, pttl, fence} end
local s = redis.call('hmget', KEYS[3], 't', 'f', 'v')
if s[1] ~= tok or tonumber(s[2]) ~= fence or not s[3] then return {1, pttl, fence} end
return {2, pttl, fence, s[3]}
