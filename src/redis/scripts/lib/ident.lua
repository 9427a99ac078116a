-- SPDX-License-Identifier: BSD-3-Clause
-- ident.lua: the holder identity (dlock_client_options.identity,
-- docs/observing.md), included first by the scripts that keep it.
--
-- A client with identity on sends one more key and one more argument, both
-- last: KEYS[#KEYS] the lock's identity hash (KEY NUL "id", in the lock's
-- slot) and ARGV[#ARGV] a NUL byte, "id:" and the identity text ("" on
-- extend and release). They are taken off here, before the script reads
-- its own layout (which counts #KEYS and #ARGV), so a call without them
-- is exactly the script's documented call. No other argument of these
-- scripts starts with a NUL byte (tokens, numbers, channels, ids, and
-- names, which are C strings) but the lock-delay's (delay.lua, NUL "dl:"),
-- which comes before this one. A client with identity off pays one
-- string.byte per call (and one string.sub with a lock-delay).
--
-- The hash holds one field per holder token: the text and " since=" with
-- the server's time of the grant in ms. It lives as long as the lock (the
-- same PX, kept by extend.lua and renew_batch.lua), and goes with it on
-- release and break; a shared lock's or semaphore's field goes with its
-- holder's lease (zlease.lua, zlease_ident). The lock key itself is never touched by this: its
-- value stays the bare token other libraries compare.
--
-- ident_grant(tok, ttl), after a grant of an exclusive hold to token tok
-- for ttl ms, writes the one holder's identity (an earlier holder's, left
-- by a lease that ran out, goes first). ident_write(field, text, ttl,
-- clear) is its general form: field := text .. " since=NOW", the hash's
-- TTL := ttl ms, other fields dropped first when clear. A shared lock or
-- semaphore (zlease.lua) keeps one field per live holder and clears
-- nothing; a fair hand-over (fair_release.lua) writes the next holder's
-- text, taken from its waiter's key. Both are nil without an identity: a
-- closure is made only for a call that needs it (issue 20). They come
-- after the grant's write, so they must never fail the script: every
-- command runs under pcall, and an ACL user without TIME or HSET
-- (docs/design.md lists them) still gets the lock, with no "since" or no
-- identity. A hash whose PEXPIRE was refused is deleted rather than left
-- without a TTL (DEL and PEXPIRE are the plain lock's own commands:
-- release and extend).
local ident_key, ident_text, ident_write, ident_grant
if #ARGV > 0 and string.byte(ARGV[#ARGV], 1) == 0 and string.sub(ARGV[#ARGV], 2, 4) == 'id:' then
  ident_text = string.sub(ARGV[#ARGV], 5)
  ident_key = KEYS[#KEYS]
  ARGV[#ARGV] = nil
  KEYS[#KEYS] = nil
  ident_write = function(field, text, ttl, clear)
    local t = redis.pcall('time')
    if type(t) == 'table' and t[1] then
      text = text .. ' since=' .. (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
    end
    if clear then redis.pcall('del', ident_key) end
    if type(redis.pcall('hset', ident_key, field, text)) == 'number' and
       redis.pcall('pexpire', ident_key, ttl) ~= 1 then
      redis.pcall('del', ident_key)
    end
  end
  ident_grant = function(tok, ttl) ident_write(tok, ident_text, ttl, true) end
end
