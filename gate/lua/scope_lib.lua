-- Upstream scope state, prepended to every script that reads or changes it.
-- The scope key holds "<st>:<reason>:<n>:<until>":
--   st     "c" cooling (provider-wide transient failure) or "p" paused
--          (systemic failure, or a wave of one permanent reason);
--   n      how many cooldowns in a row: a failed probe escalates;
--   until  when the wait ends, in ms on Redis's clock.
-- The key outlives `until` by a grace (the lease): once the wait is over,
-- the first acquire claims the probe, "h:<reason>:<n>:<token>" for one
-- lease, and every other call stays refused until the probe settles: no
-- herd when the upstream reopens. With no traffic the key expires after
-- the grace and the scope is open.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function fmt(n) return string.format('%.0f', n) end

-- scope_parse splits a value; x is until (c, p) or the probe's token (h).
local function scope_parse(v)
  local st, reason, n, x = string.match(v, '^(%a):([^:]*):(%d+):(.*)$')
  if not st then
    return nil
  end
  return st, reason, tonumber(n), x
end

-- scope_peek reads the scope for a caller about to run. It returns
-- {value, wait ms} while the scope refuses, false when it is open, and
-- true (with the parsed value) when the wait is over and the caller may
-- claim the probe.
local function scope_peek(skey)
  local v = redis.call('GET', skey)
  if not v then
    return false
  end
  local st, reason, n, x = scope_parse(v)
  if not st or st == 'h' then
    return {v, redis.call('PTTL', skey)}
  end
  local wait = tonumber(x) - now_ms()
  if wait > 0 then
    return {v, wait}
  end
  return true, reason, n
end

-- scope_claim makes the caller (token) the probe for one lease.
local function scope_claim(skey, reason, n, token, lease)
  redis.call('SET', skey, 'h:' .. reason .. ':' .. n .. ':' .. token, 'PX', lease)
end

-- scope_update applies a settle's outcome to the scope and returns
-- {value or false, wait ms}. member is the settling lease's token (the
-- probe's token when it probed; its entry in the 5xx window).
-- op: "" nothing; "o" the probe's call reached the upstream: open;
-- "c" cool for ttl × factor^(n-1), at most max, where n counts cooldowns
-- in a row (a failed probe escalates; the Go side passes factor 1 for a
-- server's hint); "p" pause for ttl; "f" one more 5xx in a sliding window
-- of window ms, cooling when more than allowed.
-- A cooldown never shortens a longer one or a pause, and a call that is
-- not the probe never ends someone else's probe.
local function scope_update(skey, fkey, op, reason, member, ttl, factor, max, grace, allowed, window)
  if op == 'f' then
    local now = now_ms()
    redis.call('ZREMRANGEBYSCORE', fkey, '-inf', fmt(now - tonumber(window)))
    redis.call('ZADD', fkey, fmt(now), member)
    redis.call('PEXPIRE', fkey, window)
    if redis.call('ZCARD', fkey) > tonumber(allowed) then
      redis.call('DEL', fkey)
      op = 'c'
    end
  end
  local cur = redis.call('GET', skey)
  local st, creason, n, x
  if cur then
    st, creason, n, x = scope_parse(cur)
  end
  local probe = st == 'h' and x == member
  if op == 'o' then
    if probe then
      redis.call('DEL', skey)
      notify(skey, '')
    end
  elseif op == 'c' or op == 'p' then
    local now = now_ms()
    local level = 1
    if probe then
      level = n + 1
    elseif st and st ~= 'h' then
      level = n
    end
    ttl = tonumber(ttl)
    if op == 'c' then
      ttl = ttl * tonumber(factor) ^ (level - 1)
      if ttl > tonumber(max) then ttl = tonumber(max) end
    end
    ttl = math.max(1, math.floor(ttl))
    local keep = false
    if cur and not probe then
      if st == 'h' or not st then
        keep = true -- another call is probing, or a value of another shape
      elseif tonumber(x) - now >= ttl then
        keep = true -- never shorten
      elseif op == 'c' and st == 'p' then
        keep = true -- a pause outranks a cooldown
      end
    end
    if not keep then
      redis.call('SET', skey, op .. ':' .. reason .. ':' .. level .. ':' .. fmt(now + ttl), 'PX', fmt(ttl + tonumber(grace)))
      notify(skey, op .. ':' .. reason)
    end
  end
  local r = scope_peek(skey)
  if r == true then
    return {false, 0}
  end
  return r or {false, 0}
end
