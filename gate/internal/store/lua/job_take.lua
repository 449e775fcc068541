-- (Prepended to the scripts that take a job.) take takes the job at key
-- for token, for a lease of lease ms, if it is free. A settled value
-- whose <until> has passed is free, and the attempt count it holds goes
-- on into the new run; a running value is held while its key lives (its
-- TTL is the lease). A value of any other shape is held.
-- It returns {0, now ms, value, pttl} refused by the value, or
-- {1, now ms, fence, previous value or false, its pttl} taken.
-- A script that read the key's value v (false: none) and Redis's TIME t
-- before, and wrote neither since, passes them: each read costs the
-- script a command.
local function take(key, token, lease, v, t)
  if v == nil then
    v = redis.call('GET', key)
  end
  t = t or redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local last, attempts, pttl = 0, '0', -2
  if v then
    pttl = redis.call('PTTL', key)
    local st, untl, fence, n = string.match(v, '^([cfd]):(%d+):(%d+):(%d+)')
    if not st or tonumber(untl) > now then
      return {0, now, v, pttl}
    end
    last, attempts = tonumber(fence), n
    if st == 'd' then attempts = '0' end
  end
  -- Fencing token: Redis's clock in microseconds, and never below the
  -- last one issued, so it keeps increasing when the key expired or a
  -- failover lost it (the clock carries it forward).
  local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local fs
  if fence > last then
    fs = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
  else
    fs = string.format('%.0f', last + 1)
  end
  -- The empty last field: taken, not renewed yet (values.go), as a free
  -- key's acquire marks its value (job_fence.lua).
  redis.call('SET', key, 'r:' .. token .. ':' .. fs .. ':' .. attempts .. ':', 'PX', lease)
  return {1, now, fs, v or false, pttl}
end
