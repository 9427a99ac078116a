-- SPDX-License-Identifier: BSD-3-Clause
-- delay_status.lua: how long a lock's lock-delay still keeps new holders
-- out (dlock_client_lock_delay(), `dlock status`; lib/delay.lua keeps the
-- marks). Read-only: TIME and reads only, so it may run anywhere a
-- status may.
--
-- KEYS[1]  the lock key
-- KEYS[2]  its delay marks (KEY NUL "delay", in the lock's slot)
--
-- Replies  ms   the latest end among the marks of holds that are no
--               live holder of KEYS[1] (their lease ran out without a
--               release), from now; 0: none is pending
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local kt = redis.call('type', KEYS[1]).ok
-- A mark is a live hold's while the lock key still holds its token: the
-- value (plain, exclusive, fair), a field (reentrant), or a member whose
-- lease runs (shared, semaphore).
local function live(m)
  if kt == 'string' then return redis.call('get', KEYS[1]) == m end
  if kt == 'hash' then return redis.call('hexists', KEYS[1], m) == 1 end
  if kt == 'zset' then
    local s = redis.call('zscore', KEYS[1], m)
    return s ~= false and s ~= nil and tonumber(s) > now
  end
  return false
end
if redis.call('type', KEYS[2]).ok ~= 'zset' then return 0 end
local m = redis.call('zrangebyscore', KEYS[2], '(' .. now, '+inf', 'WITHSCORES')
local left = 0
for i = 1, #m, 2 do
  local ms = tonumber(m[i + 1]) - now
  if ms > left and not live(m[i]) then left = ms end
end
return left
