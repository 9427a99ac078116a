-- SPDX-License-Identifier: BSD-3-Clause
-- renew_batch.lua: the watchdog's round: renew many locks in one call.
--
-- KEYS[i]      lock key i
-- ARGV[3i-2]   owner token (plain) or owner id (reentrant) of lock i
-- ARGV[3i-1]   TTL in ms for lock i, > 0
-- ARGV[3i]     'p' plain (string value), 'r' reentrant (hash) or 'z' a
--              share or permit (sorted set of leases, zlease.lua); each
--              may be followed by the lock's holder identity key (KEY NUL
--              "id", lib/ident.lua), whose hash then gets the lock's TTL
--              (a no-op when it is gone; for 'z' zlease_ident, which also
--              drops the fields of ended leases); a lock-delay's part
--              (delay_batch.lua) may come between the letter and it: the
--              renewed hold's delay mark then moves with its lease
--
-- Replies  an array, one entry per key:
--          1   renewed
--          0   the key was gone (lost: it had expired or was deleted)
--          -1  the key holds another owner's token, or another type (lost)
--
-- Invariant: a lock is renewed only while it is still ours, exactly as
-- extend.lua, reentrant_extend.lua and shared_extend.lua decide, key by
-- key.
--#include zlease.lua
--#include delay_batch.lua
local out = {}
for i = 1, #KEYS do
  local tok, ttl, mode = ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i]
  local idk, dk, dms
  mode, dk, dms = delay_batch_mode(mode)
  if #mode > 1 then idk, mode = string.sub(mode, 2), string.sub(mode, 1, 1) end
  local t = redis.call('type', KEYS[i]).ok
  local r = -1
  if t == 'none' then
    r = 0
  elseif mode == 'p' and t == 'string' then
    if redis.call('get', KEYS[i]) == tok then
      redis.call('pexpire', KEYS[i], ttl)
      if idk then redis.call('pexpire', idk, ttl) end
      if dk then delay_batch_mark(dk, dms, tok, ttl) end
      r = 1
    end
  elseif mode == 'r' and t == 'hash' then
    if redis.call('hexists', KEYS[i], tok) == 1 then
      -- Never shorter (as reentrant_extend.lua): other handles of the
      -- owner may count on a longer lease.
      if redis.call('pttl', KEYS[i]) < tonumber(ttl) then redis.call('pexpire', KEYS[i], ttl) end
      if idk then redis.call('pexpire', idk, redis.call('pttl', KEYS[i])) end
      if dk then delay_batch_mark(dk, dms, tok, redis.call('pttl', KEYS[i])) end
      r = 1
    end
  elseif mode == 'z' and t == 'zset' then
    local s = redis.call('zscore', KEYS[i], tok)
    local now = zlease_now()
    if s and tonumber(s) > now then
      redis.call('zadd', KEYS[i], 'XX', now + tonumber(ttl), tok)
      zlease_ident(KEYS[i], idk, now)
      zlease_expire(KEYS[i], now)
      if dk then delay_batch_mark(dk, dms, tok, ttl) end
      r = 1
    elseif s then
      r = 0
    end
  end
  out[i] = r
end
return out
