<?php
// phpredis (Debian php-redis) driving one server at HOST:PORT, as an application written for one
// server does. Prints one JSON object with what the client returned; the vitest test
// (test/integration/other-clients.test.ts) decides what is right.
//
//     php test/clients/phpredis.php HOST PORT PREFIX
//
// PHP has no threads: the other connection of the pub/sub and blocking-pop steps is this script
// run again as a helper process (--publish, --rpush-later).

declare(strict_types=1);

function connect(string $host, int $port): Redis
{
    // Every wait is bounded: a reply that never comes fails the script instead of hanging it.
    $r = new Redis();
    $r->connect($host, $port, 5.0);
    $r->setOption(Redis::OPT_READ_TIMEOUT, 5.0);
    return $r;
}

/** Starts this script as a helper process; returns [process, stdout pipe]. */
function helper(string ...$args): array
{
    $process = proc_open([PHP_BINARY, __FILE__, ...$args], [1 => ['pipe', 'w'], 2 => STDERR], $pipes);
    if ($process === false) throw new RuntimeException('cannot start the helper process');
    return [$process, $pipes[1]];
}

/** The helper's output, once it has exited (it bounds its own time). */
function helperOutput(array $helper): string
{
    [$process, $stdout] = $helper;
    $text = stream_get_contents($stdout);
    fclose($stdout);
    $code = proc_close($process);
    if ($code !== 0) throw new RuntimeException("helper exited with $code");
    return trim($text);
}

/** Helper: PUBLISH until a subscriber receives it (at most 5 s), print the receivers PUBLISH counted. */
function publishUntilReceived(Redis $r, string $channel, string $message): void
{
    $deadline = microtime(true) + 5;
    do {
        $receivers = $r->publish($channel, $message);
        if ($receivers > 0) break;
        usleep(20_000);
    } while (microtime(true) < $deadline);
    echo json_encode($receivers), "\n";
}

function main(string $host, int $port, string $prefix): array
{
    $k = fn(string $name): string => "$prefix:$name";
    $r = connect($host, $port);
    $other = connect($host, $port);
    $out = ['client' => 'phpredis ' . phpversion('redis')];

    $out['ping'] = $r->ping();
    $out['client_setname'] = $r->client('setname', "$prefix-app");
    $out['client_getname'] = $r->client('getname');

    $out['set'] = $r->set($k('str'), 'hello');
    $out['get'] = $r->get($k('str'));
    $out['get_missing'] = $r->get($k('missing'));
    $binary = "a\r\nb\x00c\r\n";
    $out['set_binary'] = $r->set($k('bin'), $binary);
    $out['get_binary_hex'] = bin2hex($r->get($k('bin')));
    $big = '';
    for ($i = 0; $i < 100 * 1024; $i++) $big .= chr($i % 256);
    $out['set_big'] = $r->set($k('big'), $big);
    $got = $r->get($k('big'));
    $out['get_big'] = ['length' => strlen($got), 'sha256' => hash('sha256', $got)];
    $out['incr'] = [$r->incr($k('counter')), $r->incr($k('counter'))];

    $multiKeys = array_map(fn(int $i) => $k("m$i"), range(1, 6));
    $pairs = [];
    foreach ($multiKeys as $i => $key) $pairs[$key] = 'v' . ($i + 1);
    $out['mset'] = $r->mset($pairs);
    $out['mget'] = $r->mget([...$multiKeys, $k('missing')]);
    $out['del'] = $r->del([...$multiKeys, $k('missing')]);
    $out['mget_after_del'] = $r->mget($multiKeys);

    $out['expire'] = $r->expire($k('str'), 1000);
    $out['ttl'] = $r->ttl($k('str'));

    // phpredis 5.3's hSet takes one field; several fields go through hMSet (HMSET).
    $out['hset'] = $r->hMSet($k('hash'), ['f1' => 'v1', 'f2' => 'v2', 'f3' => 'v3']);
    $out['hgetall'] = $r->hGetAll($k('hash'));
    $out['rpush'] = $r->rPush($k('list'), 'a', 'b', 'c');
    $out['lrange'] = $r->lRange($k('list'), 0, -1);
    $out['sadd'] = $r->sAdd($k('set'), 'x', 'y', 'z');
    $members = $r->sMembers($k('set'));
    sort($members);
    $out['smembers'] = $members;
    $out['zadd'] = $r->zAdd($k('zset'), 1, 'a', 2.5, 'b', 3, 'c');
    $out['zrange_withscores'] = $r->zRange($k('zset'), 0, -1, true);

    $pipe = $r->pipeline();
    for ($i = 0; $i < 50; $i++) {
        if ($i % 2 === 0) $pipe->set($k("pipe:$i"), "v$i");
        else $pipe->get($k('pipe:' . ($i - 1)));
    }
    $out['pipeline'] = $pipe->exec();

    $out['multi_exec'] = $r->multi()
        ->set($k('tx:a'), '1')
        ->incr($k('tx:b'))
        ->rPush($k('tx:c'), 'x')
        ->get($k('tx:a'))
        ->exec();

    $r->set($k('watched'), '0');
    $r->watch($k('watched'));
    $other->set($k('watched'), 'changed'); // another connection changes it between WATCH and EXEC
    $out['watch_exec'] = $r->multi()->set($k('watched'), 'mine')->exec();
    $out['watched_after'] = $r->get($k('watched'));

    $r->set($k('notnum'), 'abc');
    $out['incr_error'] = ['result' => $r->incr($k('notnum')), 'last_error' => $r->getLastError()];
    $r->clearLastError();
    $out['ping_after_error'] = $r->ping();

    $script = "redis.call('SET', KEYS[1], ARGV[1]); return {KEYS[1], redis.call('GET', KEYS[1]), redis.call('STRLEN', KEYS[1])}";
    $out['eval'] = $r->eval($script, [$k('lua'), 'from-lua'], 1);

    for ($i = 0; $i < 20; $i++) $r->set($k("scan:$i"), (string) $i);
    $r->setOption(Redis::OPT_SCAN, Redis::SCAN_RETRY); // scan() returns only non-empty batches
    $scanned = [];
    $cursor = null;
    while (($batch = $r->scan($cursor, $k('scan:*'), 5)) !== false) {
        array_push($scanned, ...$batch);
    }
    sort($scanned);
    $out['scan'] = $scanned;

    $channel = $k('chan');
    $publisher = helper('--publish', $host, (string) $port, $channel, "hello\r\nworld");
    $subscriber = connect($host, $port);
    try {
        $subscriber->subscribe([$channel], function (Redis $redis, string $ch, string $message) use (&$out) {
            $out['message'] = [$ch, $message];
            $redis->close(); // phpredis 5.3 leaves its subscribe loop only when the connection goes
        });
    } catch (RedisException $e) {
        if (!isset($out['message'])) throw $e;
    }
    $out['publish'] = json_decode(helperOutput($publisher));

    $pusher = helper('--rpush-later', $host, (string) $port, $k('queue'), 'job-1');
    $out['blpop'] = $r->blPop([$k('queue')], 3); // under the read timeout: a miss shows as []
    helperOutput($pusher);

    return $out;
}

try {
    [, $mode] = $argv + [1 => ''];
    if ($mode === '--publish') {
        [, , $host, $port, $channel, $message] = $argv;
        publishUntilReceived(connect($host, (int) $port), $channel, $message);
    } elseif ($mode === '--rpush-later') {
        [, , $host, $port, $key, $value] = $argv;
        usleep(300_000); // after the BLPOP has blocked
        connect($host, (int) $port)->rPush($key, $value);
    } else {
        [, $host, $port, $prefix] = $argv;
        echo json_encode(main($host, (int) $port, $prefix), JSON_THROW_ON_ERROR | JSON_PRESERVE_ZERO_FRACTION), "\n";
    }
} catch (Throwable $e) {
    fwrite(STDERR, 'phpredis scenario failed: ' . get_class($e) . ': ' . $e->getMessage() . "\n");
    exit(1);
}
