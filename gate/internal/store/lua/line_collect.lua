-- Collect: take the turns given to one process's callers. KEYS[1] its
-- list of grants, KEYS[2] the line's hash.
-- Reply: {epoch or '', member...}.
local out = {redis.call('HGET', KEYS[2], 'e') or ''}
for _, m in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  out[#out + 1] = m
end
redis.call('DEL', KEYS[1])
return out
