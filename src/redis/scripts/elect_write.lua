-- SPDX-License-Identifier: BSD-3-Clause
-- elect_write.lua: an election's value, written by its leader
-- (dlock_election_campaign() right after the grant, and
-- dlock_election_proclaim(); src/redis/elect.c, docs/elections.md).
--
-- KEYS[1]  the election's lock key (its value is the holder's token: a
--          fair lock's, or on a Redlock a plain lock's on this node)
-- KEYS[2]  the value (KEY NUL "value", in the lock key's slot): a hash
--          t = the token that wrote it, f = its term's fence, v = the value,
--          s = the write's sequence (the writer's clock: a later write of
--          the term has a larger one)
-- ARGV[1]  our token;  ARGV[2]  our term's fence (decimal)
-- ARGV[3]  the value;  ARGV[4]  the election's channel (lib/wake.lua)
-- ARGV[5]  the write's sequence (decimal)
--
-- Replies  1   written; "e FENCE" published on ARGV[4]
--          -1  the lock key holds another token: not the leader, nothing written
--          0   the lock key is gone (our lease ran out): nothing written
--
-- On a Redlock the script runs on every node and the write counts where a
-- majority wrote it (src/redis/elect.c); a node where the key is not ours
-- writes nothing.
--
-- Invariant: only the current holder writes, and it stamps the value with
-- its own token and fence. A reader (elect_read.lua) shows a value only
-- when its stamp is the current holder's, so a new term never shows the
-- previous term's value, even before its leader's first write.
--#include wake.lua
local v = redis.call('get', KEYS[1])
if v ~= ARGV[1] then
  if not v then return 0 end
  return -1
end
redis.call('hset', KEYS[2], 't', ARGV[1], 'f', ARGV[2], 'v', ARGV[3], 's', ARGV[5])
wake(ARGV[4], 'e ' .. ARGV[2])
return 1
