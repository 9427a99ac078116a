-- SPDX-License-Identifier: BSD-3-Clause
-- stamp_batch.lua: a Redlock election's value, put back with its term's
-- key (restore_batch.lua; docs/elections.md, "Redlock").
--
-- A lock whose key is put back with a stamp has its mode argument carry
-- it in front: '!', then five fields, each its length in bytes, ':' and
-- the bytes: the value hash's key (KEY NUL "value", in the lock's slot),
-- then elect_write.lua's t, f, v and s (the writer's token, its term's
-- fence, the value, the write's sequence); then the mode as it was ('!'
-- never starts a mode: delay_batch.lua's letters do).
-- stamp_batch_mode(mode) gives the mode as it was, then the five fields
-- (nil: no stamp). stamp_batch_write(st, tok) writes them where the key
-- put back holds tok and t is tok (a stamp of the handle's earlier term,
-- kept until its new term's first write, goes nowhere), unless the hash
-- holds a write of tok's at least as new: a node that kept the hash
-- keeps a newer write of the term (the sequence orders a leader's writes).
local function stamp_batch_mode(mode)
  if string.byte(mode, 1) ~= 33 then return mode end
  local at, st = 2, {}
  for k = 1, 5 do
    local c = string.find(mode, ':', at, true)
    local n = tonumber(string.sub(mode, at, c - 1))
    st[k] = string.sub(mode, c + 1, c + n)
    at = c + 1 + n
  end
  return string.sub(mode, at), st
end
local function stamp_batch_write(st, tok)
  local k = st[1]
  if st[2] ~= tok then return end
  local ty = redis.call('type', k).ok
  if ty == 'hash' then
    local h = redis.call('hmget', k, 't', 's')
    if h[1] == tok and (tonumber(h[2] or '') or -1) >= (tonumber(st[5]) or 0) then return end
  elseif ty ~= 'none' then
    return -- not an election's hash: left alone, as elect_write.lua would fail there
  end
  redis.call('hset', k, 't', tok, 'f', st[3], 'v', st[4], 's', st[5])
end
