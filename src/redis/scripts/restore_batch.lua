-- SPDX-License-Identifier: BSD-3-Clause
-- restore_batch.lua: put back plain locks that a node lost while a
-- majority kept them (Redlock; the watchdog's round, src/engine/watchdog.c).
--
-- KEYS[i]      lock key i
-- ARGV[3i-2]   owner token of lock i
-- ARGV[3i-1]   TTL in ms for lock i, > 0
-- ARGV[3i]     'p', or 'p' and the lock's holder identity key (KEY NUL
--              "id", lib/ident.lua), as renew_batch.lua takes it
--              (a lock-delay's part, delay_batch.lua, may come between);
--              a Redlock election's term carries its value's stamp in
--              front (lib/stamp_batch.lua)
-- ARGV[3n+1]   (with an identity key) the client's identity text
--
-- Replies  an array, one entry per key:
--          1   the key holds our token now, with the TTL given
--          0   the key holds something else (another owner's token, or
--              another type): left untouched
--
-- Why: a node that was stopped or cut off for longer than the TTL comes
-- back without the key (it expired there). The holder still has its
-- majority, but from then on one more faulty node costs it the lock:
-- "never giving up while a majority is still there" needs the key back.
-- The watchdog sends this only to nodes that answered "gone" in a round
-- in which a majority renewed the lock, and before the round ends, so a
-- release (which waits for the round) can never be overtaken by it.
--
-- The identity: a node that lost the key (a restart without persistence)
-- lost its identity hash too, and `dlock list` or dlock_client_identity()
-- asking that node would find the lock held by nobody known. It comes
-- back with the key: the holder's text, without " since=" (the grant's
-- time is the granting nodes'; ident.lua leaves it out too when TIME is
-- refused). A hash that already names this token is kept (its "since");
-- one naming another token is an earlier holder's, left by a lease that
-- ran out, and goes. Under pcall, as ident_grant: the key is what counts.
--
-- The value: an election's value hash (elect_write.lua) was lost with
-- the key, and a value on fewer nodes than a majority is not shown
-- (elect_leader.c): after two such restarts the leader would read as
-- holding with no value, nobody, with the term held. The stamp of the
-- leader's last write that a majority took comes back with the key,
-- written only where the key holds our token now.
--
-- Invariant: never touches a key someone else holds (SET NX); a single
-- node's key never makes a second majority, so putting it back cannot
-- give anyone the lock, and it expires with its TTL like any other.
--#include delay_batch.lua
--#include stamp_batch.lua
local text = ARGV[3 * #KEYS + 1]
local out = {}
for i = 1, #KEYS do
  local tok, ttl, mode = ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i]
  local dk, dms, st
  mode, st = stamp_batch_mode(mode)
  mode, dk, dms = delay_batch_mode(mode)
  local idk = #mode > 1 and text and string.sub(mode, 2)
  local r = 0
  if redis.call('set', KEYS[i], tok, 'PX', ttl, 'NX') then
    r = 1
  elseif redis.call('type', KEYS[i]).ok == 'string' and redis.call('get', KEYS[i]) == tok then
    redis.call('pexpire', KEYS[i], ttl)
    r = 1
  end
  if r == 1 and dk then delay_batch_mark(dk, dms, tok, ttl) end
  if r == 1 and st then stamp_batch_write(st, tok) end
  if r == 1 and idk then
    if redis.pcall('hexists', idk, tok) ~= 1 then
      redis.pcall('del', idk)
      redis.pcall('hset', idk, tok, text)
    end
    if redis.pcall('pexpire', idk, ttl) ~= 1 then redis.pcall('del', idk) end
  end
  out[i] = r
end
return out
