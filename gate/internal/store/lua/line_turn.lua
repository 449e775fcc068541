-- Turn: give up to ARGV[1] turns, in the line's order, skipping callers
-- whose deadline passed or whose process's lease ended. Each turn goes on
-- its owner's list of grants (ARGV[2] .. owner, a key in the line's
-- slot), which is published so the owner's process collects it at once.
-- ARGV[3] lease ms (a list not collected within it belongs to a dead
-- process), ARGV[4] keep ms.
-- Reply: the members given a turn, in order.
local now = now_ms()
reap(now, 256)
local n = tonumber(ARGV[1])
local out, lists = {}, {}
-- At most 1000 dead places are skipped in one step, so that a crashed
-- process's many places never hold Redis long.
local skipped = 0
while #out < n and skipped < 1000 do
  local p = redis.call('ZPOPMIN', KEYS[1])
  if #p == 0 then
    break
  end
  local m = p[1]
  local c, s, q, deadline, owner, tenant = parse(m)
  redis.call('SREM', KEYS[2] .. ':' .. owner, m)
  local until_ = redis.call('ZSCORE', KEYS[2], owner)
  if deadline <= now or not until_ or tonumber(until_) <= now then
    forget(m)
    skipped = skipped + 1
  else
    redis.call('HSET', KEYS[3], 'v' .. c, int(s))
    -- The tenant's last entry leaves the line: its finish tag goes, so
    -- the hash holds only tenants that wait (a tenant back at once starts
    -- at the class's time, at most one turn early).
    local ff = 'f' .. c .. ':' .. tenant
    if tonumber(redis.call('HGET', KEYS[3], ff) or '-1') == s + q then
      redis.call('HDEL', KEYS[3], ff)
    end
    local g = ARGV[2] .. owner
    redis.call('RPUSH', g, m)
    lists[g] = true
    out[#out + 1] = m
  end
end
for g in pairs(lists) do
  redis.call('PEXPIRE', g, ARGV[3])
  redis.pcall(PUBLISH, g, '1')
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  keep(ARGV[4])
end
return out
