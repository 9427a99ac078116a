-- SPDX-License-Identifier: BSD-3-Clause
-- delay.lua: lock-delay (dlock_lock_options.lock_delay_ms,
-- docs/lock-delay.md), included right after ident.lua by the scripts that
-- grant, keep or give back a hold.
--
-- A handle with a lock-delay sends one more key and one more argument,
-- last but the identity's (ident.lua takes those off first): KEYS[#KEYS]
-- the lock's delay marks (KEY NUL "delay", a sorted set in the lock's
-- slot) and ARGV[#ARGV] a NUL byte, "dl:" and the delay in ms (a NUL
-- first, as the identity's: no other argument starts so, not even one
-- made of a lock name, a C string; a cluster's channel starts with the
-- byte 1, lib/wake.lua). They are taken off here, so the rest of the
-- script reads its documented call. Without them every function below is
-- nil: a handle without a delay pays one string.byte per call and sends
-- nothing more (the round trips and commands of issue 20 stay as they
-- were).
--
-- The set holds one member per hold, its token, scored by the end of its
-- lease plus the delay (the server's clock, ms). A grant and every extend
-- or renewal write it (delay_mark, with the lease the key has now); a
-- release of a live hold takes it out (delay_clear). A hold whose lease
-- ran out (its holder crashed or was cut off) leaves its member until the
-- score passes: that is the delay. delay_left(live) says how long a new
-- grant must wait: the latest score among members that are no live
-- holder (live(tok) says, nil: none is, as when a writer kind's key is
-- gone), as ms from now (0: none), with how many such members there are
-- and the soonest one's ms (a semaphore counts each against its permits).
-- delay_refused(ms) is the acquire scripts' refusal: "taken" with ms as
-- the holder's TTL, no holder, and a last element 1 that tells the client
-- to sleep that long rather than poll (src/redis/replies.c).
--
-- delay_left writes (it drops members past their delay) and runs TIME:
-- every caller calls it after its checks that can fail and before its
-- grant's writes; commands are replicated as effects (as zlease.lua).
local delay_key, delay_ms, delay_left, delay_mark, delay_clear, delay_refused
if #ARGV > 0 and string.byte(ARGV[#ARGV], 1) == 0 and string.sub(ARGV[#ARGV], 2, 4) == 'dl:' then
  if redis.replicate_commands then redis.replicate_commands() end
  delay_ms = tonumber(string.sub(ARGV[#ARGV], 5))
  delay_key = KEYS[#KEYS]
  ARGV[#ARGV] = nil
  KEYS[#KEYS] = nil
  local function delay_now()
    local t = redis.call('time')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  delay_left = function(live)
    local now = delay_now()
    redis.call('zremrangebyscore', delay_key, '-inf', now)
    local m = redis.call('zrangebyscore', delay_key, '(' .. now, '+inf', 'WITHSCORES')
    local last, n, soonest = 0, 0, 0
    for i = 1, #m, 2 do
      if not (live and live(m[i])) then
        local ms = tonumber(m[i + 1]) - now
        n = n + 1
        if ms > last then last = ms end
        if soonest == 0 or ms < soonest then soonest = ms end
      end
    end
    return last, n, soonest
  end
  delay_mark = function(tok, lease_ms)
    local ms = tonumber(lease_ms) + delay_ms
    redis.call('zadd', delay_key, delay_now() + ms, tok)
    if redis.call('pttl', delay_key) < ms then redis.call('pexpire', delay_key, ms) end
  end
  -- Under pcall: `dlock release` sends a delay whatever the hold had
  -- (cli/commands.c), and an ACL user without ZREM, who could not have
  -- left a mark either (ZADD), must still release.
  delay_clear = function(tok) redis.pcall('zrem', delay_key, tok) end
  delay_refused = function(ms) return {0, ms, '', -1, 0, 1} end
end
