-- One sync of one replica (see store.go): the replicas present, the replicas per phase of each
-- key, the GatewayClients' use. ARGV[1]: the fleet's key prefix; ARGV[2]: the report as JSON.
-- Returns the fleet's view as JSON. Liveness times are the server's (TIME), so replicas' clocks
-- need not agree; the clients' seconds and days are the replica's. (The health evidence and
-- verdicts are board.lua's.)
if redis.replicate_commands then redis.replicate_commands() end
local p = ARGV[1]
local m = cjson.decode(ARGV[2])
local me = m.r
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {ph = {}, cl = {}, rep = 0}

-- Replicas alive: seen within m.live ms.
redis.call('ZADD', p .. 'reps', now, me)
redis.call('ZREMRANGEBYSCORE', p .. 'reps', '-inf', now - m.live)
redis.call('PEXPIRE', p .. 'reps', m.live * 2)
out.rep = redis.call('ZCARD', p .. 'reps')

-- Phases: each replica's phase of the keys it reports, in one sorted set per key and phase
-- (member the replica, score when it said so), for the replicas per phase of /admin/v1/channels.
for _, e in ipairs(m.ph or {}) do
  for _, ph in ipairs(m.phs or {}) do
    if ph ~= e.ph then redis.call('ZREM', p .. 'ph:' .. e.k .. ':' .. ph, me) end
  end
  redis.call('ZADD', p .. 'ph:' .. e.k .. ':' .. e.ph, now, me)
  redis.call('PEXPIRE', p .. 'ph:' .. e.k .. ':' .. e.ph, m.live * 2)
  redis.call('SADD', p .. 'pk', e.k)
end
redis.call('PEXPIRE', p .. 'pk', m.live * 2)
for _, k in ipairs(redis.call('SMEMBERS', p .. 'pk')) do
  local phases, any = {}, false
  for _, ph in ipairs(m.phs or {}) do
    local z = p .. 'ph:' .. k .. ':' .. ph
    redis.call('ZREMRANGEBYSCORE', z, '-inf', now - m.live)
    local n = redis.call('ZCARD', z)
    if n > 0 then phases[ph] = n; any = true end
  end
  if any then out.ph[k] = phases else redis.call('SREM', p .. 'pk', k) end
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
