-- Operator reset of an upstream: KEYS[1] its key, the others its failure
-- windows (5xx, unreachable address). Reply: the number of keys removed.
local n = redis.call('DEL', unpack(KEYS))
if n > 0 then
  redis.pcall(PUBLISH, KEYS[1], '')
end
return n
