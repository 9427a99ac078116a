-- SPDX-License-Identifier: BSD-3-Clause
-- delay_batch.lua: lock-delay (delay.lua) in the watchdog's batches
-- (renew_batch.lua, restore_batch.lua), whose calls carry many locks.
--
-- A lock with a delay has its mode argument carry it: the mode letter in
-- upper case ('P', 'R', 'Z': a lock key, which may start with any byte
-- but NUL, never comes first there), the delay in ms, ':', the length of
-- the delay key in bytes, ':', the delay key (KEY NUL "delay", in the
-- lock's slot), and then the identity's key as before.
-- delay_batch_mode(mode) gives the mode as it was without the delay (the
-- letter in lower case), then the delay key and ms (nil: none).
-- delay_batch_mark writes a renewed hold's mark as delay.lua's delay_mark
-- does: the token scored by the lease's end plus the delay.
if redis.replicate_commands then redis.replicate_commands() end
local function delay_batch_mode(mode)
  local b = string.byte(mode, 1)
  if b < 65 or b > 90 then return mode end -- not 'A'..'Z': no delay
  local c1 = string.find(mode, ':', 2, true)
  local c2 = string.find(mode, ':', c1 + 1, true)
  local ms = tonumber(string.sub(mode, 2, c1 - 1))
  local n = tonumber(string.sub(mode, c1 + 1, c2 - 1))
  return string.lower(string.sub(mode, 1, 1)) .. string.sub(mode, c2 + 1 + n),
         string.sub(mode, c2 + 1, c2 + n), ms
end
local function delay_batch_mark(dk, dms, tok, lease_ms)
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local ms = tonumber(lease_ms) + dms
  redis.call('zadd', dk, now + ms, tok)
  if redis.call('pttl', dk) < ms then redis.call('pexpire', dk, ms) end
end
