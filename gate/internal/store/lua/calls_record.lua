-- Record calls' durations among a gate's last ones, shared by every
-- process of the gate (the estimate of how long a running call takes), and
-- read them. KEYS[1] the gate's calls key. ARGV[1] the durations to add,
-- in ms, newest first, each 9 digits wide, separated by ',' ('' adds
-- none: a read), ARGV[2] how many durations to keep (at least as many as
-- ARGV[1] holds), ARGV[3] the key's TTL ms.
-- The value: durations in ms, newest first, as ARGV[1] writes them. At a
-- fixed width the newest keep are a prefix of known length, so the value
-- is cut, not parsed: a parse of 64 durations cost 5 µs of Redis time a
-- settle. A value of another length (another writer's) is dropped; the
-- reader skips a field that is not a duration.
-- Reply: the value (written), or '' for none.
local v = redis.call('GET', KEYS[1])
if ARGV[1] == '' then
  return v or ''
end
local nv = ARGV[1]
if v and #v % 10 == 9 then
  nv = string.sub(nv .. ',' .. v, 1, tonumber(ARGV[2]) * 10 - 1)
end
redis.call('SET', KEYS[1], nv, 'PX', ARGV[3])
return nv
