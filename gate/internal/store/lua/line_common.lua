-- (Prepended to every line script, after "local PUBLISH = ...".) An
-- upstream's line: KEYS[1] the waiting callers, a sorted set whose scores
-- are all 0 so that its members order it; KEYS[2] each member's lease end
-- (ms); KEYS[3] the line's hash: 'n' the last sequence number, 'e' the
-- epoch (new whenever the line is created, so a process tells a line lost
-- to a restart), 'v<class>' the class's virtual time (the start tag of its
-- last turn) and 'f<class>:<tenant>' the tenant's finish tag.
--
-- A member is <255-class, 3 digits><start tag, 15 digits><sequence, 12
-- digits>:<quantum>:<owner>:<tenant>: the line's order is class (higher
-- first), then start-time fair queuing among tenants (a tenant's next
-- start tag is its last finish tag, or the class's virtual time when that
-- is later; its finish tag adds its quantum, 1000 / weight), then arrival.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- int is n as a decimal integer string: Redis turns a Lua number into a
-- string with 14 significant digits.
local function int(n)
  return string.format('%.0f', n)
end

local function pad(n, width)
  local s = int(n)
  return string.rep('0', width - #s) .. s
end

-- parse returns a member's class, start tag, quantum, owner and tenant.
local function parse(m)
  local q, owner, tenant = string.match(string.sub(m, 31), '^:(%d+):([^:]*):(.*)$')
  return 255 - tonumber(string.sub(m, 1, 3)), tonumber(string.sub(m, 4, 18)), tonumber(q), owner, tenant
end

-- forget gives a tenant back the finish tag of its member m, which left
-- the line without a turn, when m was its last: a tenant is not pushed
-- behind turns it never took, and its tag goes once it does not wait.
local function forget(m)
  local c, s, q, _, tenant = parse(m)
  local ff = 'f' .. c .. ':' .. tenant
  if tonumber(redis.call('HGET', KEYS[3], ff) or '-1') == s + q then
    if s <= tonumber(redis.call('HGET', KEYS[3], 'v' .. c) or '0') then
      redis.call('HDEL', KEYS[3], ff)
    else
      redis.call('HSET', KEYS[3], ff, int(s))
    end
  end
end

-- reap drops up to limit members whose lease ended: nobody waits behind
-- a caller that stopped renewing its place.
local function reap(now, limit)
  local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, limit)
  -- Latest first, so a tenant's tags roll back entry by entry.
  for i = #dead, 1, -1 do
    local m = dead[i]
    if redis.call('ZREM', KEYS[1], m) == 1 then
      forget(m)
    end
    redis.call('ZREM', KEYS[2], m)
  end
end

local function keep(ms)
  for i = 1, 3 do
    redis.call('PEXPIRE', KEYS[i], ms)
  end
end
