# redis-rb (Debian ruby-redis) driving one server at HOST:PORT, as an application written for one
# server does. Prints one JSON object with what the client returned; the vitest test
# (test/integration/other-clients.test.ts) decides what is right.
#
#     ruby test/clients/redis-rb.rb HOST PORT PREFIX
require "digest"
require "json"
require "redis"

HOST, PORT, PREFIX = ARGV[0], Integer(ARGV[1]), ARGV[2]

def k(name)
  "#{PREFIX}:#{name}"
end

# Every wait is bounded: a reply that never comes fails the script instead of hanging it.
def connect(**options)
  Redis.new(host: HOST, port: PORT, timeout: 5, reconnect_attempts: 0, **options)
end

def main
  r = connect(id: "#{PREFIX}-app") # redis-rb sends CLIENT SETNAME with :id
  other = connect
  out = { "client" => "redis-rb #{Redis::VERSION}" }

  out["ping"] = r.ping
  out["client_getname"] = r.client(:getname)

  out["set"] = r.set(k("str"), "hello")
  out["get"] = r.get(k("str"))
  out["get_missing"] = r.get(k("missing"))
  binary = "a\r\nb\x00c\r\n".b
  out["set_binary"] = r.set(k("bin"), binary)
  out["get_binary_hex"] = r.get(k("bin")).unpack1("H*")
  big = (0...100 * 1024).map { |i| (i % 256).chr }.join.b
  out["set_big"] = r.set(k("big"), big)
  got = r.get(k("big"))
  out["get_big"] = { "length" => got.bytesize, "sha256" => Digest::SHA256.hexdigest(got) }
  out["incr"] = [r.incr(k("counter")), r.incr(k("counter"))]

  multi_keys = (1..6).map { |i| k("m#{i}") }
  out["mset"] = r.mset(*multi_keys.each_with_index.flat_map { |key, i| [key, "v#{i + 1}"] })
  out["mget"] = r.mget(*multi_keys, k("missing"))
  out["del"] = r.del(*multi_keys, k("missing"))
  out["mget_after_del"] = r.mget(*multi_keys)

  out["expire"] = r.expire(k("str"), 1000)
  out["ttl"] = r.ttl(k("str"))

  out["hset"] = r.hset(k("hash"), { "f1" => "v1", "f2" => "v2", "f3" => "v3" })
  out["hgetall"] = r.hgetall(k("hash"))
  out["rpush"] = r.rpush(k("list"), %w[a b c])
  out["lrange"] = r.lrange(k("list"), 0, -1)
  out["sadd"] = r.sadd(k("set"), %w[x y z])
  out["smembers"] = r.smembers(k("set")).sort
  out["zadd"] = r.zadd(k("zset"), [[1, "a"], [2.5, "b"], [3, "c"]])
  out["zrange_withscores"] = r.zrange(k("zset"), 0, -1, withscores: true)

  out["pipeline"] = r.pipelined do |pipe|
    50.times { |i| i.even? ? pipe.set(k("pipe:#{i}"), "v#{i}") : pipe.get(k("pipe:#{i - 1}")) }
  end

  out["multi_exec"] = r.multi do |tx|
    tx.set(k("tx:a"), "1")
    tx.incr(k("tx:b"))
    tx.rpush(k("tx:c"), "x")
    tx.get(k("tx:a"))
  end

  r.set(k("watched"), "0")
  out["watch_exec"] = r.watch(k("watched")) do
    other.set(k("watched"), "changed") # another connection changes it between WATCH and EXEC
    r.multi { |tx| tx.set(k("watched"), "mine") }
  end
  out["watched_after"] = r.get(k("watched"))

  r.set(k("notnum"), "abc")
  begin
    out["incr_error"] = r.incr(k("notnum"))
  rescue Redis::CommandError => e
    out["incr_error"] = { "error" => e.class.name, "message" => e.message }
  end
  out["ping_after_error"] = r.ping

  script = "redis.call('SET', KEYS[1], ARGV[1]); return {KEYS[1], redis.call('GET', KEYS[1]), redis.call('STRLEN', KEYS[1])}"
  out["eval"] = r.eval(script, keys: [k("lua")], argv: ["from-lua"])

  20.times { |i| r.set(k("scan:#{i}"), i.to_s) }
  out["scan"] = r.scan_each(match: k("scan:*"), count: 5).to_a.sort

  channel = k("chan")
  subscriber = connect
  subscriber.subscribe_with_timeout(5, channel) do |on|
    on.subscribe do |ch, count|
      out["subscribe"] = [ch, count]
      out["publish"] = other.publish(channel, "hello\r\nworld") # only once the subscription holds
    end
    on.message do |ch, message|
      out["message"] = [ch, message]
      subscriber.unsubscribe
    end
  end

  pusher = Thread.new do
    sleep 0.3
    other.rpush(k("queue"), "job-1")
  end
  out["blpop"] = r.blpop(k("queue"), timeout: 3)
  pusher.join(5)

  puts JSON.generate(out)
end

begin
  main
rescue StandardError => e
  warn "redis-rb scenario failed: #{e.class}: #{e.message}"
  exit 1
end
