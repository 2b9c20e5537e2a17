/**
 * A tiny authoritative DNS server on loopback (UDP) that the test controls: A and AAAA records
 * per name, answered with TTL 0 (so no resolver caches them), NXDOMAIN for names it does not
 * know. Enough for node's dns.Resolver (c-ares) pointed at it with setServers.
 */
import dgram from 'node:dgram';
import net from 'node:net';

export class TestDnsServer {
  private readonly records = new Map<string, string[]>();
  /** Queries answered, by name. */
  readonly queries = new Map<string, number>();
  /** While true every query gets SERVFAIL (a DNS outage). */
  failing = false;

  private constructor(private readonly socket: dgram.Socket) {
    socket.on('message', (msg, rinfo) => {
      const reply = this.answer(msg);
      if (reply !== null) socket.send(reply, rinfo.port, rinfo.address);
    });
  }

  static async start(): Promise<TestDnsServer> {
    const socket = dgram.createSocket('udp4');
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    return new TestDnsServer(socket);
  }

  /** "127.0.0.1:port", for Resolver.setServers. */
  get address(): string {
    const a = this.socket.address();
    return `${a.address}:${a.port}`;
  }

  /** The addresses (IPv4 and IPv6) `name` resolves to from now on; [] keeps the name with no records. */
  set(name: string, addresses: string[]): void {
    this.records.set(name.toLowerCase(), addresses);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.socket.close(() => resolve()));
  }

  private answer(msg: Buffer): Buffer | null {
    if (msg.length < 12) return null;
    let pos = 12;
    const labels: string[] = [];
    while (pos < msg.length && msg[pos] !== 0) {
      const len = msg[pos]!;
      labels.push(msg.toString('latin1', pos + 1, pos + 1 + len));
      pos += 1 + len;
    }
    const questionEnd = pos + 5; // the zero byte, qtype, qclass
    if (questionEnd > msg.length) return null;
    const qtype = msg.readUInt16BE(pos + 1);
    const name = labels.join('.').toLowerCase();
    this.queries.set(name, (this.queries.get(name) ?? 0) + 1);
    const known = this.records.get(name);
    const want = known?.filter((a) => (qtype === 1 ? net.isIPv4(a) : qtype === 28 ? net.isIPv6(a) : false)) ?? [];
    const header = Buffer.alloc(12);
    msg.copy(header, 0, 0, 2); // id
    const rcode = this.failing ? 2 : known === undefined ? 3 : 0; // SERVFAIL, NXDOMAIN, NOERROR
    header.writeUInt16BE(0x8400 | (msg.readUInt16BE(2) & 0x0100) | rcode, 2); // QR, AA, RD echoed
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(this.failing ? 0 : want.length, 6);
    const answers = (this.failing ? [] : want).map((a) => {
      const rdata = net.isIPv4(a) ? Buffer.from(a.split('.').map(Number)) : ipv6Bytes(a);
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0); // the question's name
      rr.writeUInt16BE(qtype, 2);
      rr.writeUInt16BE(1, 4); // IN
      rr.writeUInt32BE(0, 6); // TTL 0
      rr.writeUInt16BE(rdata.length, 10);
      return Buffer.concat([rr, rdata]);
    });
    return Buffer.concat([header, msg.subarray(12, questionEnd), ...answers]);
  }
}

function ipv6Bytes(a: string): Buffer {
  const [head, tail] = a.split('::') as [string, string | undefined];
  const h = head === '' ? [] : head.split(':');
  const t = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
  return out;
}
