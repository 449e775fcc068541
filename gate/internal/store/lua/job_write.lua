-- (Prepended to the scripts that record a run's outcome.) write records
-- it on key, decided in Go (package gate, decide.go), once the script
-- has found that it may:
-- ARGV[2] state letter: c (cooling, or ready once <until> passed),
--         f (failed), d (done)
-- ARGV[3] ttl ms: how long the state lasts (<until> = now + ttl); for d,
--         DoneTTL (0 frees the job)
-- ARGV[4] keep ms: how much longer the key stays after <until>, holding
--         the attempt count (0 and a ttl of 0: the key is deleted)
-- ARGV[5] the value after <until>: "<fence>:<attempts>[:<flags>:<reason>:<evidence>]"
-- It returns {1}.
local function write(key)
  local ttl, keep = tonumber(ARGV[3]), tonumber(ARGV[4])
  if ARGV[2] == 'd' and ttl <= 0 then
    redis.call('DEL', key)
    redis.pcall(PUBLISH, key, 'd')
    return {1}
  end
  if ttl + keep <= 0 then
    redis.call('DEL', key)
    redis.pcall(PUBLISH, key, '')
    return {1}
  end
  local s = redis.call('TIME')
  local v = ARGV[2] .. ':' .. string.format('%.0f', tonumber(s[1]) * 1000 + math.floor(tonumber(s[2]) / 1000) + ttl) .. ':' .. ARGV[5]
  redis.call('SET', key, v, 'PX', ttl + keep)
  redis.pcall(PUBLISH, key, v)
  return {1}
end
