-- SPDX-License-Identifier: BSD-3-Clause
-- elect_read.lua: an election's leader, its fence and value, on one node
-- (dlock_election_leader(), dlock_election_observe(); src/redis/elect.c).
-- Read-only.
--
-- KEYS[1]  the election's lock key;  KEYS[2]  its fencing counter
-- KEYS[3]  the value hash (elect_write.lua)
-- ARGV[1]  "1" on a node of a Redlock (several masters), else "0"
--
-- Replies  {0}                             nobody holds the lock here
--          {1, pttl, fence, token}         a holder (token) that has not
--                                          written its term's value (a
--                                          term's first moments, or a
--                                          holder that is no candidate):
--                                          shown as no leader
--          {2, pttl, fence, value, token, seq}  the holder's value, its
--                                          fence and the write's sequence
--                                          (elect_write.lua)
--
-- Invariant: the value is shown only when it is stamped with the current
-- holder's token and its term's fence: never an earlier term's value
-- beside a new term's fence.
--   - One node: the stamp's fence must be the counter's (which only a
--     grant raises, so the counter is the current holder's fence).
--   - A Redlock node: a term's fence is the largest counter of the
--     majority that granted it, which this node's counter may be below,
--     so the stamp's fence is the one replied. A plain lock's every grant
--     takes a new random token, so a stamp with the holder's token is its
--     term's, whatever the counter here says: it is not compared with
--     the stamp. (A node restarted without persistence counts again from
--     0, and a standby's failed campaigns there, each a grant on this
--     node undone, raise it above the term's fence before the leader's
--     watchdog puts the key and its stamp back; a stamp refused for it
--     read as nobody while the term was held.) Which holder leads (the
--     token of a majority) is elect.c's to say.
local tok = redis.call('get', KEYS[1])
if not tok then return {0} end
local pttl = redis.call('pttl', KEYS[1])
local fence = tonumber(redis.call('get', KEYS[2]) or '0') or 0
if redis.call('type', KEYS[3]).ok ~= 'hash' then return {1, pttl, fence, tok} end
local s = redis.call('hmget', KEYS[3], 't', 'f', 'v', 's')
local seq = tonumber(s[4] or '0') or 0
local f = tonumber(s[2])
if s[1] ~= tok or not f or not s[3] then return {1, pttl, fence, tok} end
if ARGV[1] == '1' then return {2, pttl, f, s[3], tok, seq} end
if f ~= fence then return {1, pttl, fence, tok} end
return {2, pttl, fence, s[3], tok, seq}
