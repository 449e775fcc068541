-- Renew: extend the leases of one process's waiting members. ARGV[1]
-- lease ms, ARGV[2] keep ms, then pairs of member and ms left until its
-- deadline: a lease never runs past its caller's deadline.
-- Reply: {epoch or '', member not in the line...}: each such member was
-- given a turn, reaped or lost.
local now = now_ms()
local lease = tonumber(ARGV[1])
local out = {redis.call('HGET', KEYS[3], 'e') or ''}
for i = 3, #ARGV, 2 do
  if redis.call('ZSCORE', KEYS[2], ARGV[i]) then
    redis.call('ZADD', KEYS[2], now + math.min(lease, tonumber(ARGV[i + 1])), ARGV[i])
  else
    out[#out + 1] = ARGV[i]
  end
end
if out[1] ~= '' then
  keep(ARGV[2])
end
return out
