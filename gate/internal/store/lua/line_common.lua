-- (Prepended to every line script but collect.) An upstream's line:
-- KEYS[1] the waiting callers, a sorted set whose scores are all 0 so
-- that its members order it; KEYS[2] the processes that wait, by the end
-- of their lease (ms); KEYS[3] the line's hash: 'n' the last sequence
-- number, 'o<owner>' a process's token (new whenever its lease is taken
-- afresh: a process whose token changed lost its places), 'v<class>' the
-- class's virtual time (the start tag of its last turn) and
-- 'f<class>:<tenant>' the tenant's finish tag. KEYS[2] .. ':' .. owner
-- (a set in the same slot) holds each process's members, so that a dead
-- process's places are dropped.
--
-- A member is <255-class, 3 digits><start tag, 15 digits><sequence, 12
-- digits>:<quantum>:<deadline ms>:<owner>:<tenant>: the line's order is
-- class (higher first), then start-time fair queuing among tenants (a
-- tenant's next start tag is its last finish tag, or the class's virtual
-- time when that is later; its finish tag adds its quantum, 1000 /
-- weight), then arrival.

-- SEQ_EPOCH (ms) is where arrivals are counted from: 12 digits last
-- until 2055.
local SEQ_EPOCH = 1700000000000

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

-- parse returns a member's class, start tag, quantum, deadline, owner and
-- tenant.
local function parse(m)
  local q, deadline, owner, tenant = string.match(string.sub(m, 31), '^:(%d+):(%d+):([^:]*):(.*)$')
  return 255 - tonumber(string.sub(m, 1, 3)), tonumber(string.sub(m, 4, 18)), tonumber(q), tonumber(deadline), owner, tenant
end

-- forget gives a tenant back the finish tag of its member m, which left
-- the line without a turn, when m was its last: a tenant is not pushed
-- behind turns it never took, and its tag goes once it does not wait.
local function forget(m)
  local c, s, q, _, _, tenant = parse(m)
  local ff = 'f' .. c .. ':' .. tenant
  if tonumber(redis.call('HGET', KEYS[3], ff) or '-1') == s + q then
    if s <= tonumber(redis.call('HGET', KEYS[3], 'v' .. c) or '0') then
      redis.call('HDEL', KEYS[3], ff)
    else
      redis.call('HSET', KEYS[3], ff, int(s))
    end
  end
end

-- drop removes members (of one owner) from the line without a turn,
-- latest first so a tenant's tags roll back entry by entry.
local function drop(ms)
  table.sort(ms, function(a, b) return a > b end)
  for _, m in ipairs(ms) do
    if redis.call('ZREM', KEYS[1], m) == 1 then
      forget(m)
    end
  end
end

-- reap drops up to limit places of processes whose lease ended: nobody
-- waits behind a process that stopped renewing.
local function reap(now, limit)
  local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 1)
  if #dead == 0 then
    return
  end
  local set = KEYS[2] .. ':' .. dead[1]
  drop(redis.call('SPOP', set, limit))
  if redis.call('SCARD', set) == 0 then
    redis.call('ZREM', KEYS[2], dead[1])
    redis.call('HDEL', KEYS[3], 'o' .. dead[1])
  end
end

-- claim renews owner's lease and returns its token. A process whose lease
-- had ended (a pause, a partition) or is not known (a line lost) gets a
-- new token, its places left dropped at once: it joins its callers again.
local function claim(owner, now, lease)
  local until_ = redis.call('ZSCORE', KEYS[2], owner)
  local token = redis.call('HGET', KEYS[3], 'o' .. owner)
  if not until_ or tonumber(until_) <= now or not token then
    local set = KEYS[2] .. ':' .. owner
    drop(redis.call('SMEMBERS', set))
    redis.call('DEL', set)
    local t = redis.call('TIME')
    token = t[1] .. '.' .. t[2]
    redis.call('HSET', KEYS[3], 'o' .. owner, token)
  end
  redis.call('ZADD', KEYS[2], now + lease, owner)
  return token
end

local function keep(ms)
  for i = 1, 3 do
    redis.call('PEXPIRE', KEYS[i], ms)
  end
end

-- next_turn takes the first caller in line whose process lives and whose
-- deadline has not passed, if fits(its class) says its call can be
-- served, and advances its class's virtual time; the places it passes
-- over are dropped (skip.n counts them: at most 1000 a step, so that a
-- crashed process's many places never hold Redis long). It returns the
-- member and its owner; nil when nobody waits or the first does not fit
-- (put back, its key kept keep ms if it was the last).
local function next_turn(now, skip, fits, keep_ms)
  while skip.n < 1000 do
    local p = redis.call('ZPOPMIN', KEYS[1])
    if #p == 0 then
      return nil
    end
    local m = p[1]
    local c, s, q, deadline, owner, tenant = parse(m)
    local until_ = redis.call('ZSCORE', KEYS[2], owner)
    local live = deadline > now and until_ and tonumber(until_) > now
    if live and not fits(c) then
      -- Back in its place (every score is 0: the member is its place).
      redis.call('ZADD', KEYS[1], 0, m)
      if redis.call('PTTL', KEYS[1]) < 0 then
        redis.call('PEXPIRE', KEYS[1], keep_ms)
      end
      return nil
    end
    redis.call('SREM', KEYS[2] .. ':' .. owner, m)
    if live then
      redis.call('HSET', KEYS[3], 'v' .. c, int(s))
      -- The tenant's last entry leaves the line: its finish tag goes, so
      -- the hash holds only tenants that wait (a tenant back at once
      -- starts at the class's time, at most one turn early).
      local ff = 'f' .. c .. ':' .. tenant
      if tonumber(redis.call('HGET', KEYS[3], ff) or '-1') == s + q then
        redis.call('HDEL', KEYS[3], ff)
      end
      return m, owner
    end
    forget(m)
    skip.n = skip.n + 1
  end
  return nil
end

-- grant puts member m's turn on its owner's list of grants (prefix ..
-- owner, a key in the line's slot), noted in lists for publish.
local function grant(prefix, m, owner, lists)
  local g = prefix .. owner
  redis.call('RPUSH', g, m)
  lists[g] = true
end

-- publish tells the owners of the lists granted to collect their turns at
-- once; a list not collected within lease ms belongs to a dead process.
local function publish(lists, lease)
  for g in pairs(lists) do
    redis.call('PEXPIRE', g, lease)
    redis.pcall(PUBLISH, g, '1')
  end
end
