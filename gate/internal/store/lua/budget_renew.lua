-- Keep a running call's reservation for one more lease, in its
-- renewal's round trip. ARGV[1] the member that reserved it, ARGV[2]
-- lease ms. A reservation that lapsed (its lease ended without a renewal:
-- the process died, or the lease was lost) or was released stays so.
-- Reply: 1 kept, 0 not held.
local s = redis.call('ZSCORE', KEYS[3], ARGV[1])
if not s or tonumber(s) <= NOW then
  return 0
end
local lease = tonumber(ARGV[2])
redis.call('ZADD', KEYS[3], 'XX', NOW + lease, ARGV[1])
if redis.call('PTTL', KEYS[3]) < lease then
  redis.call('PEXPIRE', KEYS[3], lease)
end
return 1
