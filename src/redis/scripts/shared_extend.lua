-- SPDX-License-Identifier: BSD-3-Clause
-- shared_extend.lua: a new lease for our share or permit (zlease.lua).
--
-- KEYS[1]  the lock key
-- ARGV[1]  our owner token
-- ARGV[2]  new TTL in ms, > 0
-- and, last, the holder identity's key and argument (lib/ident.lua): the
-- hash follows the key's TTL, without the fields of ended leases
--
-- Replies  1   extended
--          0   the key, or our lease in it, had already ended
--          -1  no member of ours in the key
--          error WRONGTYPE when the key holds another type
--
-- Invariant: never revives an ended lease; never touches another member.
--#include ident.lua
--#include delay.lua
--#include zlease.lua
local key = KEYS[1]
local s, reply = zlease_score_of(key, ARGV[1])
if not s then return reply end
local now = zlease_now()
if s <= now then return 0 end
redis.call('zadd', key, 'XX', now + tonumber(ARGV[2]), ARGV[1])
if delay_mark then delay_mark(ARGV[1], ARGV[2]) end
zlease_ident(key, ident_key, now)
zlease_expire(key, now)
return 1
