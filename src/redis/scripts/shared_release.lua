-- SPDX-License-Identifier: BSD-3-Clause
-- shared_release.lua: give back one share of a shared lock or one permit
-- of a semaphore (zlease.lua), and wake whoever waits for it.
--
-- KEYS[1]  the lock key
-- ARGV[1]  our owner token
-- ARGV[2]  pub/sub channel to notify waiters on, or '' for none
-- and, last, the holder identity's key and argument (lib/ident.lua): our
-- field goes, with those of ended leases (zlease_ident)
--
-- Replies  1   released (our member is removed)
--          0   the key, or our lease in it, had already ended
--          -1  no member of ours: the share or permit is not ours (or an
--              exclusive holder has the key)
--          error WRONGTYPE when the key holds another type
--
-- Invariant: removes only our own member; the key lives exactly as long as
-- the last lease left in it.
--#include ident.lua
--#include delay.lua
--#include zlease.lua
local key = KEYS[1]
local s, reply = zlease_score_of(key, ARGV[1])
if not s then return reply end
local now = zlease_now()
redis.call('zrem', key, ARGV[1])
zlease_ident(key, ident_key, now, ARGV[1])
zlease_expire(key, now)
if s <= now then return 0 end
if delay_clear then delay_clear(ARGV[1]) end -- a live share given back: no delay
if ARGV[2] ~= '' then redis.pcall('publish', ARGV[2], 'r') end
return 1
