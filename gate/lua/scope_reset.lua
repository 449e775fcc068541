-- Operator reset of an upstream scope: KEYS[1] scope, KEYS[2] failures.
-- Reply: number of keys removed.
local n = redis.call('DEL', KEYS[1], KEYS[2])
if n > 0 then notify(KEYS[1], '') end
return n
