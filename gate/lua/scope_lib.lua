-- Upstream scope cooldown, shared by settle.lua (single node: one script
-- touches job and scope keys) and scope.lua (cluster: the scope's own slot).
-- The scope key holds "c:<reason>" (cooling) or "p:<reason>" (paused).
-- op: "" nothing, "c" cool for ttl, "p" pause for ttl, "f" count one failure
-- in a sliding window of window ms and cool for ttl when more than allowed.
-- Returns {scopeValue or false, pttl}.
local function scope_update(skey, fkey, op, reason, ttl, allowed, window, member)
  ttl = tonumber(ttl)
  if op == 'f' then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('ZREMRANGEBYSCORE', fkey, '-inf', string.format('%.0f', now - tonumber(window)))
    redis.call('ZADD', fkey, string.format('%.0f', now), member)
    redis.call('PEXPIRE', fkey, window)
    if redis.call('ZCARD', fkey) > tonumber(allowed) then
      redis.call('DEL', fkey)
      op = 'c'
    end
  end
  if op == 'c' or op == 'p' then
    local cur = redis.call('GET', skey)
    local left = redis.call('PTTL', skey)
    -- Never shorten: a pause outranks a cooldown, a longer wait outranks a shorter one.
    local keep = cur and (left < 0 or left >= ttl or (op == 'c' and string.sub(cur, 1, 1) == 'p'))
    if not keep then
      redis.call('SET', skey, op .. ':' .. reason, 'PX', ttl)
      notify(skey, op .. ':' .. reason)
    end
  end
  local v = redis.call('GET', skey)
  if v then
    return {v, redis.call('PTTL', skey)}
  end
  return {false, 0}
end
