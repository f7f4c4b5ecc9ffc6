-- Which aoi replica holds a session, as aoi computes it: rendezvous (highest random weight) hashing of the
-- session id over the replicas that are up, each scored by FNV-1a 64 of "REPLICA\0SESSION" finished with
-- splitmix64's mixer (src/cluster/rendezvous.cpp). HAProxy's server names are the replicas' --replica-id.
-- A request whose path names no session (/v1/sessions, /health, ...) gets no replica: HAProxy balances it.
--
-- Lua 5.3 integers are 64-bit and wrap on overflow, as the C++ does; scores compare unsigned (math.ult).

local function fnv1a(s)
  local h = 0xcbf29ce484222325
  for i = 1, #s do
    h = (h ~ s:byte(i)) * 0x100000001b3
  end
  return h
end

local function mix(x)
  x = (x ~ (x >> 30)) * 0xbf58476d1ce4e5b9
  x = (x ~ (x >> 27)) * 0x94d049bb133111eb
  return x ~ (x >> 31)
end

local function owner(session, backend)
  local best, best_score
  for name, server in pairs(core.backends[backend].servers) do
    local status = server:get_stats()["status"] or ""
    if status:sub(1, 2) == "UP" or status == "no check" then
      local score = mix(fnv1a(name .. "\0" .. session))
      if best == nil or math.ult(best_score, score) or (score == best_score and name < best) then
        best, best_score = name, score
      end
    end
  end
  return best
end

-- lua.aoi_replica(BACKEND): the replica for the session in the request's path (/v1/sessions/ID/...).
core.register_fetches("aoi_replica", function(txn, backend)
  local session = txn.sf:path():match("^/v1/sessions/([^/]+)")
  if session == nil then return nil end
  return owner(session, backend)
end)
