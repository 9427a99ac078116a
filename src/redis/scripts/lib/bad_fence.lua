-- SPDX-License-Identifier: BSD-3-Clause
-- bad_fence.lua: shared prelude, joined at build time into every script
-- that includes it by name on a line of its own (cmake/embed_scripts.cmake;
-- the SHA1 is that of the joined body, which is what Redis hashes too).
--
-- The fencing counter must be absent or a decimal below 2^53 (what INCR
-- and fence_sync.lua can count on); checked before anything is written.
-- Returns nil when it is, else the WRONGTYPE error reply to return.
--
-- bad_fence(k) reads the counter with one GET (pcall: another type is an
-- error reply there, not a failure of the script); bad_fence(k, f) takes
-- it as the caller already read it (MGET: a string, or false when the key
-- is absent or holds another type), so a sound counter, the usual case,
-- costs no command of its own. Only a counter that is not a string asks
-- TYPE which of the two it is. One function, not two: every script that
-- includes this makes its closures on every call (issue 20).
local function bad_fence(k, f)
  if f == nil then
    f = redis.pcall('get', k)
    f = type(f) == 'string' and f
  end
  local t = 'string'
  if f then
    if f == '0' or (#f <= 15 and string.match(f, '^[1-9]%d*$')) then return nil end
  else
    t = redis.call('type', k).ok
    if t == 'none' then return nil end
  end
  return redis.error_reply('WRONGTYPE the fencing counter of this lock holds a ' .. t ..
                           ' that is not a counter; nothing written')
end
