-- Read an upstream scope's state: KEYS[1] scope. Reply: {value or false, pttl}.
local s = redis.call('GET', KEYS[1])
if s then
  return {s, redis.call('PTTL', KEYS[1])}
end
return {false, -2}
