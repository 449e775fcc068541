-- Take a job if it is free. KEYS[1] the job's key (its value: values.go).
-- ARGV[1] token, ARGV[2] lease ms,
-- ARGV[3] the fence of the run a waiter waited for ('' for none): a
--         success of that run ("d:...:<fence>:...") refuses the waiter
--         even after its done mark ended, so a waiter never runs a job
--         twice.
-- A settled value whose <until> has passed is free, and the attempt count
-- it holds goes on into the new run; a running value is held while its key
-- lives (its TTL is the lease). A value of any other shape is held.
-- Reply: {0, now ms, value, pttl}          refused by the value
--        {1, now ms, fence, previous value or false, its pttl}  taken
local v = redis.call('GET', KEYS[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local last, attempts, pttl = 0, '0', -2
if v then
  pttl = redis.call('PTTL', KEYS[1])
  local st, untl, fence, n = string.match(v, '^([cfd]):(%d+):(%d+):(%d+)')
  if not st or tonumber(untl) > now then
    return {0, now, v, pttl}
  end
  last, attempts = tonumber(fence), n
  if st == 'd' then attempts = '0' end
end
-- Fencing token: Redis's clock in microseconds, and never below the last
-- one issued, so it keeps increasing when the key expired or a failover
-- lost it (the clock carries it forward).
local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
local fs
if fence > last then
  fs = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
else
  fs = string.format('%.0f', last + 1)
end
redis.call('SET', KEYS[1], 'r:' .. ARGV[1] .. ':' .. fs .. ':' .. attempts, 'PX', ARGV[2])
return {1, now, fs, v or false, pttl}
