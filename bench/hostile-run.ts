/**
 * `npm run bench -- --hostile` (D42): what each hostile body shape costs the gateway and the
 * strict reader, against a flat body of the same size.
 */
import { writeFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { CardRequestSchema } from '../src/cards/card-schemas.js';
import { scanStrictJson, type SchemaNode } from '../src/edge/strict-json.js';
import { HOSTILE_SIZES, httpsJson, PASSWORD, pinning, root } from './bench-servers.js';
import { BODY_SHAPES, hostileBody } from './hostile-bodies.js';
import type { Started } from './soak.js';

/** Bytes of one shape sent per size and route: enough requests for the CPU figure to settle. */
const hostileBytes = (quick: boolean) => Number(process.env['BENCH_HOSTILE_MIB'] ?? (quick ? 4 : 16)) * 1024 * 1024;

/** POSTs `body` `count` times, one after another on one kept-alive TLS connection; returns the statuses seen. */
async function postMany(url: string, body: string, count: number, ca: Buffer, headers: Record<string, string>): Promise<Record<string, number>> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1, ca });
  const statuses: Record<string, number> = {};
  try {
    for (let i = 0; i < count; i += 1) {
      const status = await new Promise<number>((resolve, reject) => {
        const req = request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
        req.on('error', reject);
        req.end(body);
      });
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
  } finally {
    agent.destroy();
  }
  return statuses;
}

/**
 * `-- --hostile` (D42): the server CPU per KiB of body of each hostile shape (bench/hostile-bodies.ts)
 * at 16 KiB and at 1 MiB, on login (no token) and on card creation, next to a flat body of the same
 * size; and the strict reader's own CPU per KiB, in this process, beside its count of characters
 * read. Writes bench/hostile-results.json.
 */
export async function hostileBodies(started: Started, dir: string, ca: Buffer, quick: boolean): Promise<void> {
  const HOSTILE_BYTES = hostileBytes(quick);
  const gateway = await started('C-gateway-hostile', 0, ['gateway', 'hostile', dir]);
  const token = String((await httpsJson(gateway.url, '/api/v1/auth/login', { username: 'bench', password: PASSWORD }, ca))['accessToken']);
  const routes: { route: string; path: string; headers: Record<string, string> }[] = [
    { route: 'login', path: '/api/v1/auth/login', headers: {} },
    { route: 'card', path: '/api/v1/issuing/cards', headers: { authorization: `Bearer ${token}` } },
  ];
  const rows: {
    route: string;
    bytes: number;
    shape: string;
    requests: number;
    cpuUsPerRequest: number;
    cpuUsPerKiB: number;
    xFlat: number;
    statuses: Record<string, number>;
  }[] = [];
  for (const bytes of HOSTILE_SIZES) {
    const count = Math.max(8, Math.round(HOSTILE_BYTES / bytes));
    for (const { route, path, headers } of routes) {
      let flat = 0;
      for (const shape of BODY_SHAPES) {
        const body = hostileBody(shape, bytes);
        process.stderr.write(`bench: hostile ${route} ${shape} ${bytes} B x ${count}\n`);
        await postMany(`${gateway.url}${path}`, body, Math.max(2, count / 8), ca, headers);
        const before = await gateway.cpuMicros();
        const statuses = await postMany(`${gateway.url}${path}`, body, count, ca, headers);
        const cpuUsPerRequest = ((await gateway.cpuMicros()) - before) / count;
        const cpuUsPerKiB = cpuUsPerRequest / (body.length / 1024);
        if (shape === 'flat') flat = cpuUsPerKiB;
        rows.push({
          route,
          bytes,
          shape,
          requests: count,
          cpuUsPerRequest: Math.round(cpuUsPerRequest),
          cpuUsPerKiB: +cpuUsPerKiB.toFixed(2),
          xFlat: +(cpuUsPerKiB / flat).toFixed(2),
          statuses,
        });
      }
    }
  }
  // The reader alone, in this process: CPU per KiB and characters read per character.
  const reader: { bytes: number; shape: string; cpuUsPerKiB: number; xFlat: number; workPerChar: number; depth: number }[] = [];
  for (const bytes of HOSTILE_SIZES) {
    let flat = 0;
    for (const shape of BODY_SHAPES) {
      const body = hostileBody(shape, bytes);
      const rounds = Math.max(8, Math.round(HOSTILE_BYTES / bytes));
      for (let i = 0; i < rounds / 4; i += 1) scanStrictJson(body, CardRequestSchema as SchemaNode);
      const before = process.cpuUsage();
      let report = scanStrictJson(body, CardRequestSchema as SchemaNode);
      for (let i = 1; i < rounds; i += 1) report = scanStrictJson(body, CardRequestSchema as SchemaNode);
      const used = process.cpuUsage(before);
      const cpuUsPerKiB = (used.user + used.system) / rounds / (body.length / 1024);
      if (shape === 'flat') flat = cpuUsPerKiB;
      reader.push({
        bytes,
        shape,
        cpuUsPerKiB: +cpuUsPerKiB.toFixed(3),
        xFlat: +(cpuUsPerKiB / flat).toFixed(2),
        workPerChar: +(report.work / body.length).toFixed(3),
        depth: report.depth,
      });
    }
  }
  const worst = Math.max(...rows.map((row) => row.xFlat));
  const result = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, model: cpus()[0]?.model, node: process.version, pinned: pinning },
    target: { xFlat: 3, worst, met: worst <= 3 },
    gateway: rows,
    reader,
  };
  writeFileSync(join(root, 'bench', 'hostile-results.json'), `${JSON.stringify(result, null, 2)}\n`);
  const line = (cells: (string | number)[]) => cells.map((cell, i) => String(cell).padEnd([8, 9, 22, 10, 12, 8][i] ?? 10)).join('  ');
  process.stdout.write(`${line(['route', 'bytes', 'shape', 'µs/req', 'µs/KiB', 'x flat'])}\n`);
  for (const row of rows)
    process.stdout.write(`${line([row.route, row.bytes, row.shape, row.cpuUsPerRequest, row.cpuUsPerKiB, row.xFlat])}  ${JSON.stringify(row.statuses)}\n`);
  process.stdout.write(`\nreader alone (this process)\n${line(['', 'bytes', 'shape', 'work/char', 'µs/KiB', 'x flat'])}\n`);
  for (const row of reader) process.stdout.write(`${line(['', row.bytes, row.shape, row.workPerChar, row.cpuUsPerKiB, row.xFlat])}\n`);
  process.stdout.write(
    `\nD42 (every shape within 3x of a flat body of its size, through the gateway): worst ${worst}x, ${worst <= 3 ? 'met' : 'NOT met'}\nwrote bench/hostile-results.json\n`,
  );
}
