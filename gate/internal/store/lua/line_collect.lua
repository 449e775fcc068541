-- Collect: take the turns given to one process's callers. KEYS[1] its
-- list of grants, KEYS[2] the line's hash; ARGV[1] the owner.
-- Reply: {the owner's token or '', member...}.
local out = {redis.call('HGET', KEYS[2], 'o' .. ARGV[1]) or ''}
for _, m in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  out[#out + 1] = m
end
redis.call('DEL', KEYS[1])
return out
