-- SPDX-License-Identifier: BSD-3-Clause
-- wake_to.lua: shared prelude (cmake/embed_scripts.cmake), after wake.lua,
-- for the scripts that wake one waiter. Apart from wake.lua so that a
-- script's fast path, which wakes nobody or everyone, does not pay for
-- its closure.
--
-- wake_to(ch, id, msg) publishes a wake-up addressed to one waiter: the
-- "w ID" of a listed waiter, or a fair hand-over. An id (wait id or fair
-- token) of 48 hex digits ends with the 16 of its client's inbox tag: the
-- message goes to that client's inbox for the lock, the channel ch NUL
-- tag (src/redis/keys.h), which only the process waiting with that id has
-- subscribed, instead of to every process waiting on the lock. Any other
-- id (32 digits: a waiter of an older dlock) is woken on ch, as before.
-- So is one whose inbox nobody listens to, or this user may not publish
-- to (an ACL that grants the lock's channel by its exact name refuses
-- both the waiter's SUBSCRIBE and this PUBLISH): the waiter listens on ch
-- too, and a waiter that is gone costs the unlisted ones (readers) no
-- wake-up.
local function wake_to(ch, id, msg)
  if #id == 48 and string.byte(ch, 1) ~= 1 then
    local r = redis.pcall('publish', ch .. '\0' .. string.sub(id, 33), msg)
    if type(r) == 'number' and r > 0 then return r end
  end
  return wake(ch, msg)
end
