-- Record a run's outcome, decided in Go (package gate, decide.go): one write, checked
-- for ownership. KEYS[1] the job's key. (A success also leaves its token
-- in the job's done key, by a SET sent beside this script: job.go.)
-- ARGV[1] token: the run owns the job while it holds "r:<token>[:...]"
-- ARGV[2] state letter: c (cooling, or ready once <until> passed),
--         f (failed), d (done)
-- ARGV[3] ttl ms: how long the state lasts (<until> = now + ttl); for d,
--         DoneTTL (0 frees the job)
-- ARGV[4] keep ms: how much longer the key stays after <until>, holding
--         the attempt count (0 and a ttl of 0: the key is deleted)
-- ARGV[5] the value after <until>: "<fence>:<attempts>[:<flags>:<reason>:<evidence>]"
-- ARGV[6] "1": a success written late, by the retry of a settle Redis did
--         not take (the job is done whoever took it since; a newer value
--         is still never overwritten)
-- A run whose lease expired and whose key is gone still records a
-- cooldown or a failed mark: dropping a failure would be an immediate free
-- retry; so does a success written late, whose key expired while Redis
-- was away. Otherwise a success or a release finds it not owned: another
-- run may have taken the job since.
-- Reply: {1} written; {0, the value found or false} not owned.
local t = 'r:' .. ARGV[1]
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= t and string.sub(cur, 1, #t + 1) ~= t .. ':' then
  return {0, cur}
end
local ttl, keep = tonumber(ARGV[3]), tonumber(ARGV[4])
if not cur and ((ARGV[2] == 'd' and ARGV[6] ~= '1') or ttl <= 0) then
  return {0, false}
end
if ARGV[2] == 'd' and ttl <= 0 then
  redis.call('DEL', KEYS[1])
  redis.pcall(PUBLISH, KEYS[1], 'd')
  return {1}
end
if ttl + keep <= 0 then
  redis.call('DEL', KEYS[1])
  redis.pcall(PUBLISH, KEYS[1], '')
  return {1}
end
local s = redis.call('TIME')
local v = ARGV[2] .. ':' .. string.format('%.0f', tonumber(s[1]) * 1000 + math.floor(tonumber(s[2]) / 1000) + ttl) .. ':' .. ARGV[5]
redis.call('SET', KEYS[1], v, 'PX', ttl + keep)
redis.pcall(PUBLISH, KEYS[1], v)
return {1}
