<?php
// One PHP-style worker for bench/conn-per-request-tls.mjs: N times, what a PHP request does with
// phpredis and no persistent connection — connect, AUTH, one GET, close — one after the other.
// Prints "ops total_ms p50_ms p99_ms" on one line.
//   php bench/lib/php-conn-per-op.php HOST PORT OPS PASSWORD KEY [CAFILE]   (CAFILE: TLS, SNI localhost)
[$host, $port, $ops, $password, $key] = [$argv[1], (int)$argv[2], (int)$argv[3], $argv[4], $argv[5]];
$ca = $argv[6] ?? null;
$lat = [];
$t0 = hrtime(true);
for ($i = 0; $i < $ops; $i++) {
  $s = hrtime(true);
  $r = new Redis();
  if ($ca !== null) {
    $r->connect("tls://$host", $port, 5.0, null, 0, 0, ['stream' => ['cafile' => $ca, 'peer_name' => 'localhost', 'verify_peer' => true]]);
  } else {
    $r->connect($host, $port, 5.0);
  }
  if (!$r->auth(['default', $password])) { fwrite(STDERR, "AUTH refused\n"); exit(1); }
  $v = $r->get($key);
  if ($v !== 'value') { fwrite(STDERR, 'GET answered ' . var_export($v, true) . "\n"); exit(1); }
  $r->close();
  $lat[] = (hrtime(true) - $s) / 1e6;
}
$total = (hrtime(true) - $t0) / 1e6;
sort($lat);
$pick = fn($p) => $lat[min(count($lat) - 1, (int)floor($p / 100 * count($lat)))];
printf("%d %.3f %.4f %.4f\n", $ops, $total, $pick(50), $pick(99));
