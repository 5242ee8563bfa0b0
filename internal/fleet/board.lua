-- One exchange of one replica with the fleet's health board (board.go), with the semantics of
-- health.FleetBoard: ARGV[1] the key prefix, ARGV[2] now (ms, the caller's clock, as the board's
-- rules are), ARGV[3] the sync interval (ms), ARGV[4] the replica, ARGV[5] the exchange as JSON.
-- Returns the board's state as JSON; the inputs are computed from it in Go. TTLs only collect
-- garbage: every rule compares the times stored with now.
local p, now, iv, me = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local m = cjson.decode(ARGV[5])
local limit = now - 3 * iv
local keep = 6 * iv

-- expire: verdicts, leases, Retry-Afters, reports, replicas, evidence.
for _, k in ipairs(redis.call('SMEMBERS', p .. 'vk')) do
  local u = tonumber(redis.call('HGET', p .. 'v:' .. k, 'until'))
  if not u or now >= u then redis.call('DEL', p .. 'v:' .. k); redis.call('SREM', p .. 'vk', k) end
end
local leases = redis.call('HGETALL', p .. 'leases')
for i = 1, #leases, 2 do
  local holder, u = string.match(leases[i + 1], '^(.*)|(%-?%d+)$')
  if now > tonumber(u) then redis.call('HDEL', p .. 'leases', leases[i]) end
end
local retry = redis.call('HGETALL', p .. 'retry')
for i = 1, #retry, 2 do
  if now >= tonumber(retry[i + 1]) then redis.call('HDEL', p .. 'retry', retry[i]) end
end
local repat = redis.call('HGETALL', p .. 'repat')
for i = 1, #repat, 2 do
  if tonumber(repat[i + 1]) < limit then
    redis.call('DEL', p .. 'rep:' .. repat[i], p .. 'repe:' .. repat[i])
    redis.call('HDEL', p .. 'repat', repat[i])
  end
end
local seen = redis.call('HGETALL', p .. 'seen')
for i = 1, #seen, 2 do
  if tonumber(seen[i + 1]) < limit then
    redis.call('HDEL', p .. 'seen', seen[i]); redis.call('HDEL', p .. 'prev', seen[i])
  end
end
local live = {}
for _, r in ipairs(redis.call('HKEYS', p .. 'repat')) do
  local e = redis.call('GET', p .. 'repe:' .. r)
  if e then for _, k in ipairs(cjson.decode(e)) do live[k] = true end end
end
for _, k in ipairs(redis.call('HKEYS', p .. 'ev')) do
  if not live[k] then redis.call('HDEL', p .. 'ev', k) end
end

-- proposals: NX when prev is 0, else compare-and-set on the held version.
for _, v in ipairs(m.props or {}) do
  local key = p .. 'v:' .. v.k
  if v['until'] > now then
    local held = redis.call('HGET', key, 'ver')
    if (v.prev == 0 and not held) or (v.prev ~= 0 and held and tonumber(held) == v.prev) then
      local ver = redis.call('INCR', p .. 'ver:' .. v.k)
      redis.call('DEL', key)
      redis.call('HSET', key, 'blob', v.blob, 'until', v['until'], 'ver', ver, 'by', me)
      redis.call('PEXPIRE', key, v['until'] - now + keep)
      redis.call('SADD', p .. 'vk', v.k)
    end
  end
end

-- this replica's reports: Retry-After ends, probe leases, the reports themselves.
for _, r in ipairs(m.ra or {}) do
  local cur = tonumber(redis.call('HGET', p .. 'retry', r[1]) or '0')
  if r[2] > now and r[2] > cur then redis.call('HSET', p .. 'retry', r[1], r[2]) end
end
local wants = {}
for _, k in ipairs(m.lease or {}) do
  wants[k] = true
  local l = redis.call('HGET', p .. 'leases', k)
  if not l or string.match(l, '^(.*)|') == me then redis.call('HSET', p .. 'leases', k, me .. '|' .. (now + iv)) end
end
leases = redis.call('HGETALL', p .. 'leases')
for i = 1, #leases, 2 do
  if string.match(leases[i + 1], '^(.*)|') == me and not wants[leases[i]] then redis.call('HDEL', p .. 'leases', leases[i]) end
end
redis.call('HSET', p .. 'prev', me, redis.call('HGET', p .. 'seen', me) or '0')
redis.call('HSET', p .. 'seen', me, now)
if m.n > 0 then
  redis.call('SET', p .. 'rep:' .. me, m.reports, 'PX', keep)
  redis.call('SET', p .. 'repe:' .. me, cjson.encode(m.evk or {}), 'PX', keep)
  redis.call('HSET', p .. 'repat', me, now)
else
  redis.call('DEL', p .. 'rep:' .. me, p .. 'repe:' .. me)
  redis.call('HDEL', p .. 'repat', me)
end
for _, k in ipairs(m.evk or {}) do redis.call('HSETNX', p .. 'ev', k, now) end
for _, h in ipairs({'leases', 'retry', 'repat', 'seen', 'prev', 'ev'}) do redis.call('PEXPIRE', p .. h, keep + 60000) end

-- the board's state for the inputs.
local out = {reps = {}, seen = {}, prev = {}, ev = {}, v = {}, leases = {}, retry = {}}
for _, r in ipairs(redis.call('HKEYS', p .. 'repat')) do
  if r ~= me then
    local b = redis.call('GET', p .. 'rep:' .. r)
    if b then out.reps[r] = b end
  end
end
local function hash(name)
  local t, kv = {}, redis.call('HGETALL', p .. name)
  for i = 1, #kv, 2 do t[kv[i]] = kv[i + 1] end
  return t
end
out.seen, out.prev, out.ev, out.leases, out.retry = hash('seen'), hash('prev'), hash('ev'), hash('leases'), hash('retry')
for _, k in ipairs(redis.call('SMEMBERS', p .. 'vk')) do
  local h = redis.call('HMGET', p .. 'v:' .. k, 'blob', 'ver', 'by')
  if h[1] then out.v[k] = {blob = h[1], ver = tonumber(h[2]), by = h[3]} end
end
return cjson.encode(out)
