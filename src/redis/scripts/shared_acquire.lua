-- SPDX-License-Identifier: BSD-3-Clause
-- shared_acquire.lua: take a share of a shared (read) lock, or a permit of
-- a semaphore: one member per holder with a lease of its own (zlease.lua).
--
-- KEYS[1]  the lock key
-- KEYS[2]  (shared locks only, optional: when #KEYS == 3) the fencing
--          counter of this lock name, raised by the grant
-- KEYS[#KEYS]  (shared locks only) the "writer waiting" mark, KEY NUL "ww"
-- ARGV[1]  our owner token
-- ARGV[2]  TTL in ms, > 0
-- ARGV[3]  0 for a shared lock, else the semaphore's number of permits N
-- ARGV[4]  (reentrant shared locks only) OWNER#: the prefix of every token
--          of this owner (client x thread); an owner with a live share
--          already is granted another past a writer's mark: the writer
--          waits for that share, so holding the new one back would make
--          the owner wait for itself
-- and, last, the holder identity's key and argument (lib/ident.lua): a
-- grant writes our field beside the other holders', and the fields of
-- ended leases go (zlease_ident)
--
-- Replies  {1, guard}         granted; guard the counter after the grant's
--                             INCR (0 without KEYS[2]): no fence of the
--                             reader's, the value a Redlock client syncs
--                             (fence_sync.lua) as a writer's
--          {0, pttl, holder}  not now: an exclusive holder (its token and
--                             TTL), a waiting writer (holder '', the mark's
--                             TTL), or all N permits taken (holder '', ms
--                             until the first lease ends)
--          {-1, stored}       a semaphore whose key stores another N
--          {-2, 0}            (with ARGV[4]) the owner is the writer
--          error WRONGTYPE    the key holds another kind of lock, or is not a
--                             lock (a sorted set without a TTL), or the
--                             counter is not a counter
--
-- Invariant: a shared holder is never granted beside an exclusive one, nor
-- while a writer waits (writer preference) unless its owner holds a share
-- already; a semaphore never has more than
-- N live leases. Expired members are pruned first and never counted. Every
-- check runs before the first write.
--
-- The counter: a reader holds no fencing token (it does not write), but
-- its grant raises the name's counter as a writer's does (INCR), so that
-- the counter is above what status showed once anyone, reader or writer,
-- was granted the name since. That is what a guarded break compares
-- (break.lua): without it a name only readers ever held showed fence 0,
-- "break whoever holds it", and a writer that came after the readers shown
-- was broken. Writers' fences keep growing (the counter never goes down);
-- they skip the readers' numbers.
--#include ident.lua
--#include delay.lua
--#include bad_fence.lua
--#include zlease.lua
local key, tok, ttl, n = KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local fk = #KEYS == 3 and KEYS[2] or nil
local mark = KEYS[#KEYS]
local t = redis.call('type', key).ok
-- Every sorted set dlock writes has a TTL (its last lease's end): one
-- without is not a lock of ours (holders.lua says so too).
if t == 'zset' and redis.call('pttl', key) < 0 then
  return redis.error_reply('WRONGTYPE lock key holds a sorted set without a TTL, not a lock')
end
if t == 'string' and ARGV[4] and string.sub(redis.call('get', key), 1, #ARGV[4]) == ARGV[4] then
  return {-2, 0} -- the owner is the writer: a downgrade, not offered
end
if t == 'string' and n == 0 then
  return {0, redis.call('pttl', key), redis.call('get', key)}
end
if t ~= 'none' and t ~= 'zset' then
  return redis.error_reply('WRONGTYPE lock key holds a ' .. t .. ', not a ' ..
                           (n == 0 and 'shared lock' or 'semaphore') .. '; nothing written')
end
local now = zlease_now()
local stored = t == 'zset' and zlease_permits(key) or nil
local live = t == 'zset' and redis.call('zcount', key, '(' .. now, '(inf') or 0
if n == 0 then
  if stored then
    return redis.error_reply('WRONGTYPE lock key holds a semaphore, not a shared lock; nothing written')
  end
  local left = redis.call('pttl', mark)
  local holds = false
  if left > 0 and ARGV[4] and t == 'zset' then
    for _, m in ipairs(redis.call('zrangebyscore', key, '(' .. now, '(inf')) do
      if string.sub(m, 1, #ARGV[4]) == ARGV[4] then holds = true break end
    end
  end
  if left > 0 and not holds then return {0, left, ''} end
  if fk then
    local e = bad_fence(fk)
    if e then return e end
  end
else
  if stored and stored ~= n then return {-1, stored} end
  if not stored and live > 0 then
    return redis.error_reply('WRONGTYPE lock key holds a shared lock, not a semaphore; nothing written')
  end
  if live >= n then
    local first = redis.call('zrangebyscore', key, '(' .. now, '(inf', 'WITHSCORES', 'LIMIT', 0, 1)
    return {0, tonumber(first[2]) - now, ''}
  end
end
-- The grant. The key's TTL is the last live lease's end, read before the
-- first write, and PEXPIRE runs first (on a new key it writes nothing; on
-- a set it only sets the TTL the set gets anyway, which no live lease
-- outlasts): so every command after the first ZADD has already run, and an
-- ACL that refuses one refuses the script before the ZADD, not after it
-- (a set left without a TTL would keep every writer out).
-- A lock-delay (delay.lua): marks of holds that are no live share count.
-- A shared lock waits for the last of them; a semaphore counts each
-- against its permits and waits for the soonest.
if delay_left then
  local function holds(m)
    return t == 'zset' and tonumber(redis.call('zscore', key, m) or '0') > now
  end
  local ms, dead, soonest = delay_left(holds)
  if n == 0 and ms > 0 then return delay_refused(ms) end
  if n > 0 and dead > 0 and live + dead >= n then return delay_refused(soonest) end
end
-- The counter first of the grant's writes: refused (an ACL), it leaves
-- nothing; raised and then the grant refused, it has only grown.
local guard = fk and redis.call('incr', fk) or 0
local last = now + ttl
local top = redis.call('zrevrangebyscore', key, '(inf', '(' .. now, 'WITHSCORES', 'LIMIT', 0, 1)
if #top > 0 and tonumber(top[2]) > last then last = tonumber(top[2]) end
redis.call('pexpire', key, last - now)
if t == 'zset' then
  zlease_ident(key, ident_key, now)
  redis.call('zremrangebyscore', key, '-inf', now)
end
if n > 0 and not stored then redis.call('zadd', key, 'inf', ZLEASE_SENTINEL .. n) end
redis.call('zadd', key, now + ttl, tok)
if t == 'none' then redis.call('pexpire', key, last - now) end -- a set has it already
if ident_write then ident_write(tok, ident_text, last - now, false) end
if delay_mark then delay_mark(tok, ttl) end
return {1, guard}
