-- (scope_lib.lua is prepended.) Cluster form of the scope update, on the
-- scope's own slot. KEYS[1] scope, KEYS[2] scope failures.
-- ARGV[1] op, ARGV[2] reason, ARGV[3] the settling lease's token, ARGV[4]
-- ttl ms, ARGV[5] factor, ARGV[6] max ms, ARGV[7] grace ms, ARGV[8]
-- allowed failures, ARGV[9] window ms (see scope_update).
-- Reply: {scope value or false, wait ms}.
return scope_update(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9])
