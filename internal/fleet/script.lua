-- One sync of one replica (see store.go). ARGV[1]: the fleet's key prefix; ARGV[2]: the report
-- as JSON. Returns the fleet's view as JSON. Times are the server's (TIME), so replicas' clocks
-- need not agree; TTLs are the server's too.
if redis.replicate_commands then redis.replicate_commands() end
local p = ARGV[1]
local m = cjson.decode(ARGV[2])
local me = m.r
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {ev = {}, v = {}, l = {}, ra = {}, cl = {}, rep = 0}

-- Replicas alive: seen within m.live ms.
redis.call('ZADD', p .. 'reps', now, me)
redis.call('ZREMRANGEBYSCORE', p .. 'reps', '-inf', now - m.live)
redis.call('PEXPIRE', p .. 'reps', m.live * 2)
out.rep = redis.call('ZCARD', p .. 'reps')

-- Evidence: deltas into this replica's hash and the fleet's sum, per key; fields are
-- "BUCKET:NAME" and buckets older than the report's horizon leave both.
local function prune(h, horizon)
  for _, f in ipairs(redis.call('HKEYS', h)) do
    local b = tonumber(string.match(f, '^(%-?%d+):'))
    if b and b < horizon then redis.call('HDEL', h, f) end
  end
end
for _, e in ipairs(m.ev or {}) do
  local own = p .. 'e:' .. e.k .. '@' .. me
  local sum = p .. 's:' .. e.k
  for f, d in pairs(e.c or {}) do
    redis.call('HINCRBY', own, f, d)
    redis.call('HINCRBY', sum, f, d)
  end
  if e.h then prune(own, e.h); prune(sum, e.h) end
  redis.call('PEXPIRE', own, m.ttl)
  redis.call('PEXPIRE', sum, m.ttl)
  redis.call('SADD', p .. 'ek', e.k)
  if e.ph and e.ph ~= '' then
    for _, ph in ipairs(m.phs or {}) do
      if ph ~= e.ph then redis.call('ZREM', p .. 'ph:' .. e.k .. ':' .. ph, me) end
    end
    redis.call('ZADD', p .. 'ph:' .. e.k .. ':' .. e.ph, now, me)
    redis.call('PEXPIRE', p .. 'ph:' .. e.k .. ':' .. e.ph, m.ttl)
  end
end
for _, k in ipairs(redis.call('SMEMBERS', p .. 'ek')) do
  local c, any = {}, false
  local kv = redis.call('HGETALL', p .. 's:' .. k)
  for i = 1, #kv, 2 do c[kv[i]] = tonumber(kv[i + 1]); any = true end
  local mine = redis.call('HGETALL', p .. 'e:' .. k .. '@' .. me)
  for i = 1, #mine, 2 do
    local v = (c[mine[i]] or 0) - tonumber(mine[i + 1])
    if v == 0 then c[mine[i]] = nil else c[mine[i]] = v end
  end
  local phases = {}
  for _, ph in ipairs(m.phs or {}) do
    local z = p .. 'ph:' .. k .. ':' .. ph
    redis.call('ZREMRANGEBYSCORE', z, '-inf', now - m.live)
    local n = redis.call('ZCARD', z)
    if n > 0 then phases[ph] = n; any = true end
  end
  -- A key is known while some replica's counts or phase of it are.
  if any then out.ev[k] = {c = c, ph = phases} else redis.call('SREM', p .. 'ek', k) end
end

-- Verdicts: the first to trip sets one (prev empty: SET NX); a change is a compare-and-set on
-- the value the replica last saw (prev); next empty with prev matching lifts it.
for _, v in ipairs(m.vp or {}) do
  local key = p .. 'v:' .. v.k
  if v.prev == nil or v.prev == '' then
    if v.next ~= '' then redis.call('SET', key, v.next, 'NX', 'PX', v.ttl) end
  elseif redis.call('GET', key) == v.prev then
    if v.next == '' then redis.call('DEL', key) else redis.call('SET', key, v.next, 'PX', v.ttl) end
  end
  redis.call('SADD', p .. 'vk', v.k)
end
for _, k in ipairs(redis.call('SMEMBERS', p .. 'vk')) do
  local key = p .. 'v:' .. k
  local cur = redis.call('GET', key)
  if cur then out.v[k] = {v = cur, t = redis.call('PTTL', key)} else redis.call('SREM', p .. 'vk', k) end
end

-- Probe leases: one owner per key for m.lt ms, renewed by the owner on every sync that still
-- wants it; released early by the owner.
for _, k in ipairs(m.rel or {}) do
  local key = p .. 'l:' .. k
  if redis.call('GET', key) == me then redis.call('DEL', key) end
end
for _, k in ipairs(m.pr or {}) do
  local key = p .. 'l:' .. k
  redis.call('SET', key, me, 'NX', 'PX', m.lt)
  local owner = redis.call('GET', key)
  if owner == me then redis.call('PEXPIRE', key, m.lt) end
  out.l[k] = owner or ''
end

-- Retry-After: the latest one heard for a key applies to the fleet until it ends.
for _, r in ipairs(m.ra or {}) do
  if r.ms > 0 then
    redis.call('SET', p .. 'ra:' .. r.k, me, 'PX', r.ms)
    redis.call('SADD', p .. 'rak', r.k)
  end
end
for _, k in ipairs(redis.call('SMEMBERS', p .. 'rak')) do
  local ttl = redis.call('PTTL', p .. 'ra:' .. k)
  if ttl > 0 then out.ra[k] = ttl else redis.call('SREM', p .. 'rak', k) end
end

-- GatewayClients: requests and tokens per second over the last minute, and per UTC day.
for _, c in ipairs(m.cu or {}) do
  local mk = p .. 'cm:' .. c.c
  if c.r ~= 0 then redis.call('HINCRBY', mk, 'r' .. c.s, c.r) end
  if c.t ~= 0 then redis.call('HINCRBY', mk, 't' .. c.s, c.t) end
  redis.call('PEXPIRE', mk, 120000)
  local dk = p .. 'cd:' .. c.c .. ':' .. c.d
  if c.r ~= 0 then redis.call('HINCRBY', dk, 'r', c.r) end
  if c.t ~= 0 then redis.call('HINCRBY', dk, 't', c.t) end
  redis.call('PEXPIRE', dk, 172800000)
end
for _, c in ipairs(m.cr or {}) do
  local mk = p .. 'cm:' .. c.c
  local kv = redis.call('HGETALL', mk)
  local mr, mt = 0, 0
  for i = 1, #kv, 2 do
    local kind, sec = string.sub(kv[i], 1, 1), tonumber(string.sub(kv[i], 2))
    if sec and sec > c.s - 60 then
      if kind == 'r' then mr = mr + tonumber(kv[i + 1]) else mt = mt + tonumber(kv[i + 1]) end
    elseif sec then
      redis.call('HDEL', mk, kv[i])
    end
  end
  local d = redis.call('HMGET', p .. 'cd:' .. c.c .. ':' .. c.d, 'r', 't')
  out.cl[c.c] = {mr = mr, mt = mt, dr = tonumber(d[1]) or 0, dt = tonumber(d[2]) or 0}
end

return cjson.encode(out)
