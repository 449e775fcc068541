-- An operator's reset of a job: its done key holds the reset's time
-- (":<µs>", Redis TIME) for SuccessMemory instead of a success's token.
-- No waiter or acquire reads a token in it, so the job is not refused as
-- done; and a run older than the reset whose failure finds its key gone
-- does not write it (job_settle_gone.lua compares the fences).
-- KEYS[1] the done key. ARGV[1] SuccessMemory in ms. Reply: 1.
local now = redis.call('TIME')
redis.call('SET', KEYS[1], ':' .. now[1] .. string.format('%06d', tonumber(now[2])), 'PX', ARGV[1])
return 1
