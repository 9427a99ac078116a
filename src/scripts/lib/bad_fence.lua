-- SPDX-License-Identifier: BSD-3-Clause
-- bad_fence.lua: shared prelude, joined at build time into every script
-- that includes it by name on a line of its own (cmake/embed_scripts.cmake;
-- the SHA1 is that of the joined body, which is what Redis hashes too).
--
-- The fencing counter must be absent or a decimal below 2^53 (what INCR
-- and fence_sync.lua can count on); checked before anything is written.
-- Returns nil when it is, else the WRONGTYPE error reply to return.
local function bad_fence(k)
  local t = redis.call('type', k).ok
  if t == 'none' then return nil end
  local f = t == 'string' and redis.call('get', k)
  if f and (f == '0' or (#f <= 15 and string.match(f, '^[1-9]%d*$'))) then return nil end
  return redis.error_reply('WRONGTYPE the fencing counter of this lock holds a ' .. t ..
                           ' that is not a counter; nothing written')
end
