-- Renew: extend one process's lease, which keeps all its places.
-- ARGV[1] owner, ARGV[2] lease ms, ARGV[3] keep ms.
-- Reply: the owner's token; a new one when its places were dropped.
local now = now_ms()
reap(now, 256)
local token = claim(ARGV[1], now, tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[2] .. ':' .. ARGV[1], ARGV[3])
keep(ARGV[3])
return token
