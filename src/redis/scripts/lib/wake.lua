-- SPDX-License-Identifier: BSD-3-Clause
-- wake.lua: shared prelude, joined at build time (cmake/embed_scripts.cmake)
-- into the scripts that wake waiters on release.
--
-- wake(ch, msg) publishes a wake-up, best effort (pcall: a refused
-- PUBLISH must not fail a release that already wrote). A channel that
-- starts with the byte 1 is a Redis Cluster lock's (src/redis/keys.c): it goes
-- out with SPUBLISH (sharded pub/sub, Redis 7) on the rest of the name,
-- which is in the lock key's slot, so the message stays on the lock's
-- shard instead of being broadcast to every node.
local function wake(ch, msg)
  if string.byte(ch, 1) == 1 then
    return redis.pcall('spublish', string.sub(ch, 2), msg)
  end
  return redis.pcall('publish', ch, msg)
end
