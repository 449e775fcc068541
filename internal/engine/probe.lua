-- Read a key the script does not declare (ARGV[1]; nothing writes it).
-- Redis runs it; Dragonfly refuses it ("script tried accessing undeclared
-- key") unless its scripts may touch undeclared keys, which they may only
-- when each script locks the whole store or runs non-atomically
-- (--default_lua_flags=allow-undeclared-keys, disable-atomicity).
return redis.call('EXISTS', ARGV[1])
