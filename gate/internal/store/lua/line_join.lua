-- Join: take a place for a caller, unless the turns ahead of it cannot
-- come before its deadline at the given rate.
-- ARGV[1] class (0-255), ARGV[2] quantum, ARGV[3] owner, ARGV[4] tenant,
-- ARGV[5] lease ms, ARGV[6] ms left until the deadline, ARGV[7] keep ms
-- (the keys' TTL), ARGV[8] turns per second ('0': unknown, no refusal),
-- ARGV[9] the key of the caller's job's mark ('' for none; a key in the
-- line's slot: line_place_job.lua reads it), which holds the member until
-- the deadline. ARGV[10] how long (ms) the caller's class holds the
-- headroom for itself once it joined (line_give.lua; '0': none).
-- ARGV[11] the caller's place before it was dropped ('' for a first
-- join): it joins again at its first arrival.
-- Reply: {1, ahead, member, the owner's token} joined; {0, ahead, wait
-- ms} refused.
local now = now_ms()
reap(now, 256)
local c, q, left = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[6])
local ff = 'f' .. ARGV[1] .. ':' .. ARGV[4]
local h = redis.call('HMGET', KEYS[3], 'v' .. ARGV[1], ff, 'n')
local v, n = tonumber(h[1] or '0'), tonumber(h[3] or '0')
local s, seq
if ARGV[11] and ARGV[11] ~= '' then
  -- A caller whose place was dropped (its process's lease ended, the line
  -- was lost with a server) joins again at its first arrival: ahead of
  -- every caller who came later, at its class's virtual time if that
  -- passed its own start tag (the turns went on without it).
  local _, os = parse(ARGV[11])
  s, seq = math.min(os, v), tonumber(string.sub(ARGV[11], 19, 30))
else
  -- An arrival is counted in ms since 2023-11-14 (SEQ_EPOCH), one up at
  -- least, so that arrivals after a line was lost still come after those
  -- of the callers who join again.
  s, seq = math.max(v, tonumber(h[2] or '0')), math.max(n + 1, now - SEQ_EPOCH)
end
local m = pad(255 - c, 3) .. pad(s, 15) .. pad(seq, 12) .. ':' .. ARGV[2] .. ':' .. int(now + left) .. ':' .. ARGV[3] .. ':' .. ARGV[4]
local ahead = redis.call('ZLEXCOUNT', KEYS[1], '-', '(' .. m)
local rate = tonumber(ARGV[8])
if rate > 0 then
  local wait = math.ceil((ahead + 1) * 1000 / rate)
  if wait > left then
    return {0, ahead, wait}
  end
end
local token = claim(ARGV[3], now, tonumber(ARGV[5]))
redis.call('HSET', KEYS[3], 'n', int(math.max(n, seq)), ff, int(math.max(s + q, tonumber(h[2] or '0'))))
local hold = tonumber(ARGV[10] or '0')
if hold > 0 then
  -- The highest class that asked lately: a lower class that asked last
  -- does not take the headroom over until the higher one's hold ends.
  local hv = redis.call('HMGET', KEYS[3], 'hc', 'hu')
  if not hv[1] or c >= tonumber(hv[1]) or tonumber(hv[2]) <= now then
    redis.call('HSET', KEYS[3], 'hc', ARGV[1], 'hu', int(now + hold))
  end
end
redis.call('ZADD', KEYS[1], 0, m)
redis.call('SADD', KEYS[2] .. ':' .. ARGV[3], m)
redis.call('PEXPIRE', KEYS[2] .. ':' .. ARGV[3], ARGV[7])
if ARGV[9] and ARGV[9] ~= '' then
  redis.call('SET', ARGV[9], m, 'PX', math.max(left, 1))
end
keep(ARGV[7])
return {1, ahead, m, token}
