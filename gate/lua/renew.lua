-- Extend the lease if the caller still owns it.
-- KEYS[1] lock; ARGV[1] the lease's lock value, ARGV[2] lease ms.
-- GT never moves the expiry earlier: should Redis's clock step back, the
-- lock still lapses no earlier than the clock that issued its fence allows,
-- so the next fence (Redis TIME) is still higher.
-- Returns 1 if owned (and extended unless that would shorten it), 0 if not.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
  return 1
end
return 0
