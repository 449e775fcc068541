-- Extend the lease if the caller still owns it, and the meta key with it so
-- it keeps outliving the lock by AttemptsTTL however long the call runs.
-- KEYS[1] lock, KEYS[2] meta; ARGV[1] token, ARGV[2] lease ms,
-- ARGV[3] lease + AttemptsTTL ms. Returns 1 if extended, 0 if not owned.
if redis.call('GET', KEYS[1]) == 'r:' .. ARGV[1] then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
