-- Operator reset of an upstream scope: KEYS[1] scope, KEYS[2] failures.
-- Reply: number of keys removed.
return redis.call('DEL', KEYS[1], KEYS[2])
