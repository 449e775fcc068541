-- Extend the lease if the caller still owns it.
-- KEYS[1] lock; ARGV[1] token, ARGV[2] lease ms. Returns 1 if extended, 0 if not owned.
if redis.call('GET', KEYS[1]) == 'r:' .. ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
