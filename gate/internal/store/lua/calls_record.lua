-- Record calls' durations among a gate's last ones, shared by every
-- process of the gate (the estimate of how long a running call takes), and
-- read them. KEYS[1] the gate's calls key. ARGV[1] the durations to add,
-- in ms, newest first, separated by ',' ('' adds none: a read), ARGV[2]
-- how many durations to keep, ARGV[3] the key's TTL ms.
-- The value: durations in ms, newest first, separated by ','.
-- Reply: the value (written), or '' for none.
local v = redis.call('GET', KEYS[1])
if ARGV[1] == '' then
  return v or ''
end
local out, n, keep = {}, 0, tonumber(ARGV[2])
for _, s in ipairs({ARGV[1], v or ''}) do
  for d in string.gmatch(s, '%d+') do
    if n >= keep then break end
    n = n + 1
    out[n] = d
  end
end
local nv = table.concat(out, ',')
redis.call('SET', KEYS[1], nv, 'PX', ARGV[3])
return nv
