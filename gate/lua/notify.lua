-- (Prepended to every script that changes a job's or a scope's state.)
-- A change is published on the channel named as the key that changed, so
-- waiters (wait.go) and watchers (watch.go) re-read at once instead of
-- polling. Go prepends the command: local PUBLISH = 'PUBLISH' on one node,
-- 'SPUBLISH' on a cluster, where a shard channel lives in its key's slot.
-- pcall: a user without channel permission (Redis 7 creates users with
-- resetchannels) or a server without SPUBLISH must not fail the write;
-- waiters then wake at the lease's end, or poll. scope_lib.lua's
-- scope_update calls notify: a script that calls it is built with this
-- file first (scripts.go, newWriteScripts).
local function notify(key, msg)
  redis.pcall(PUBLISH, key, msg)
end
