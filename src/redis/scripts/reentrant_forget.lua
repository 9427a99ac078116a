-- SPDX-License-Identifier: BSD-3-Clause
-- reentrant_forget.lua: drop a freed handle's bookkeeping fields from a
-- counted lock (see reentrant_acquire.lua), so that a key held for long by
-- one owner does not collect two fields per handle that ever used it.
--
-- KEYS[1]  the lock key
-- ARGV[1]  owner id
-- ARGV[2]  handle id
--
-- Replies  the number of fields dropped (0 to 3)
--
-- Invariant: touches only that handle's bookkeeping, never a count. The
-- client sends it only for a handle none of whose operations is in
-- doubt: no delayed copy of one can arrive later and find them gone.
if redis.call('type', KEYS[1]).ok ~= 'hash' then return 0 end
local p = ARGV[1] .. '#' .. ARGV[2]
return redis.call('hdel', KEYS[1], p .. ':s', p .. ':u', p .. ':r')
