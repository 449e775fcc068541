-- Renew: extend the leases of one process's waiting members. ARGV[1]
-- lease ms, ARGV[2] keep ms, then pairs of member and ms left until its
-- deadline: a lease never runs past its caller's deadline.
-- Reply: {epoch or '', members renewed}.
local now = now_ms()
local lease, n = tonumber(ARGV[1]), 0
for i = 3, #ARGV, 2 do
  if redis.call('ZSCORE', KEYS[2], ARGV[i]) then
    redis.call('ZADD', KEYS[2], now + math.min(lease, tonumber(ARGV[i + 1])), ARGV[i])
    n = n + 1
  end
end
local e = redis.call('HGET', KEYS[3], 'e')
if e then
  keep(ARGV[2])
end
return {e or '', n}
