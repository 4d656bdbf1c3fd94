/**
 * Where a server's CPU per request goes, item by item, from a V8 CPU profile (.cpuprofile) of a
 * measured window: each sample of the main thread is given to the item of the deepest frame on
 * its stack that belongs to the gateway's own work (its modules and the libraries doing that
 * work: jose, ioredis, undici, prom-client, pino, Ajv), else to Fastify when a Fastify frame is
 * on the stack, else to Node's own layers (TLS and sockets, the HTTP parser, streams and
 * timers). So a socket write made by ioredis counts as the store's, one made by Fastify's reply
 * as Fastify's. An item's µs per request is its share of the busy samples times the main
 * thread's CPU per request over the same window; the other threads' CPU (V8's GC helpers,
 * libuv's pool writing the audit and log files) is its own row.
 *
 *   node dist/bench/profile-items.js <file.cpuprofile> <main-thread CPU µs per request> [other threads' µs]
 */
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

export interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string }; children?: number[] }[];
  samples: number[];
  timeDeltas?: number[];
}

/** An item, and the frames that are its: by the script's URL, or by the function's name for code made at run time. */
interface Rule {
  item: string;
  urls?: RegExp;
  functions?: RegExp;
}

/** The gateway's own work (and the bare proxy's forward), checked in this order. */
const OWN: readonly Rule[] = [
  { item: 'token check (bearer guard, jose, verified-token cache, credential)', urls: /\/src\/edge\/bearer-guard|\/src\/auth\/|\/node_modules\/jose\// },
  {
    item: 'client address and per-address budget',
    urls: /\/src\/edge\/(address-budgets|request-budget|client-origin)|\/src\/foundation\/address-ranges|\/node_modules\/ipaddr\.js\//,
  },
  { item: 'edge guards and URL checks', urls: /\/src\/edge\/(edge-guards|url-checks|listener-hardening|not-found)/ },
  {
    item: 'route policy and rate limits',
    urls: /\/src\/edge\/(route-policy|rate-limit-headers)|\/src\/store\/(memory|redis)\/rate-limiter|\/node_modules\/rate-limiter-flexible\//,
  },
  { item: 'body parse (strict JSON reader)', urls: /\/src\/edge\/strict-json/ },
  {
    item: 'validation (Ajv, card rules)',
    urls: /\/node_modules\/ajv\/|\/src\/cards\/(validate-card-request|tolerance|iso-4217|card-schemas)/,
    functions: /^validate\d*$/,
  },
  { item: 'request fingerprint', urls: /\/src\/cards\/request-fingerprint/ },
  { item: 'idempotency claim and record (card side)', urls: /\/src\/cards\/(card-idempotency|pending-records)/ },
  // Events (D63-D66): the store's event code and the connector's event contract here, before the store and the upstream call.
  {
    item: 'events: recording (envelope, event JSON and its codec, card-number checks)',
    urls: /\/src\/events\/(event-recording|install-events|card-events)|\/src\/foundation\/(event-ids|card-number-detector)|\/src\/store\/(memory|redis)\/(events|event-codec|event-scripts)|\/src\/connector\/connector-events-contract|\/src\/edge\/connector-listener/,
  },
  { item: 'events: webhook deliveries (loop, signing, sender)', urls: /\/src\/events\/delivery\// },
  {
    item: 'store calls (store code, ioredis)',
    urls: /\/src\/store\/|\/node_modules\/(ioredis|redis-parser|redis-errors|standard-as-callback|cluster-key-slot|denque)\//,
  },
  {
    item: 'upstream call (connector client / reply-from, undici)',
    urls: /\/src\/connector\/|\/src\/cards\/card-forwarding|\/node_modules\/(undici|@fastify\/reply-from|@fastify\/http-proxy)\//,
  },
  { item: 'sealing (AES-GCM)', urls: /\/src\/cards\/card-sealing/ },
  { item: 'masking and the answer', urls: /\/src\/cards\/card-presentation|\/src\/foundation\/masking/ },
  { item: 'other card use case code', urls: /\/src\/cards\// },
  {
    item: 'metrics (prom-client)',
    urls: /\/src\/observability\/(metrics|store-timing|store-observer)|\/src\/edge\/request-metrics|\/node_modules\/(prom-client|tdigest|bintrees)\//,
  },
  { item: 'audit line and outcomes', urls: /\/src\/observability\/(audit|file-appender|outcomes)/ },
  {
    item: 'logging (pino)',
    urls: /\/src\/observability\/logger|\/node_modules\/(pino|pino-std-serializers|sonic-boom|fast-redact|quick-format-unescaped|thread-stream|atomic-sleep|on-exit-leak-free)\//,
  },
  { item: 'error rendering', urls: /\/src\/edge\/(error-handler|framework-errors)/ },
  { item: 'response serialization (fast-json-stringify)', urls: /\/node_modules\/fast-json-stringify\// },
  { item: 'routes and request context', urls: /\/src\/edge\/routes\/|\/src\/edge\/request-context/ },
  { item: 'other gateway code', urls: /\/src\// },
];

const FASTIFY: Rule = {
  item: 'Fastify (routing, hooks, body read, reply)',
  urls: /\/node_modules\/(fastify|find-my-way|fast-querystring|@fastify\/|avvio|light-my-request|secure-json-parse|fast-uri|toad-cache|rfdc|abstract-logging|process-warning)\//,
};

const NODE: readonly Rule[] = [
  { item: 'Node: TLS and sockets', urls: /^node:(_tls_wrap|tls|net|internal\/(tls|stream_base_commons|net|js_stream_socket))/ },
  { item: 'Node: HTTP parser and messages', urls: /^node:(_http_|internal\/http)/ },
  {
    item: 'Node: streams, events, timers, promises',
    urls: /^node:(internal\/(streams|timers|process|async_hooks|event_target|abort_controller)|events|stream|timers)/,
  },
  { item: 'Node: crypto', urls: /^node:(crypto|internal\/crypto)/ },
  { item: 'Node: other', urls: /^node:/ },
];

const SPECIAL = new Map([
  ['(garbage collector)', 'garbage collection (main thread)'],
  ['(program)', 'V8 and native code outside JavaScript ((program))'],
]);

const matches = (rule: Rule, frame: { functionName: string; url: string }) =>
  (rule.urls !== undefined && frame.url !== '' && rule.urls.test(frame.url)) ||
  (rule.functions !== undefined && frame.url === '' && rule.functions.test(frame.functionName));

export interface ProfileItem {
  item: string;
  samples: number;
  share: number;
  usPerRequest: number;
}

/**
 * The profile's busy samples by item, largest first, with µs per request for `mainUsPerRequest`
 * (the main thread's CPU per request over the profiled window). Idle samples are left out.
 */
export function profileItems(profile: CpuProfile, mainUsPerRequest: number): ProfileItem[] {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const itemOf = new Map<number, string | undefined>();
  const classify = (id: number): string | undefined => {
    if (itemOf.has(id)) return itemOf.get(id);
    const leaf = byId.get(id)!;
    let item: string | undefined = SPECIAL.get(leaf.callFrame.functionName);
    if (leaf.callFrame.functionName === '(idle)') item = undefined;
    else if (!item) {
      const stack: { functionName: string; url: string }[] = [];
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) stack.push(byId.get(at)!.callFrame);
      const deepest = (rules: readonly Rule[]) => {
        for (const frame of stack) for (const rule of rules) if (matches(rule, frame)) return rule.item;
        return undefined;
      };
      // The deepest frame of the gateway's own work, unless Fastify sits below it (a reply's write).
      for (const frame of stack) {
        const own = OWN.find((rule) => matches(rule, frame));
        if (own) {
          item = own.item;
          break;
        }
        if (matches(FASTIFY, frame)) {
          item = FASTIFY.item;
          break;
        }
      }
      item ??= deepest(NODE) ?? 'unattributed (native, no JavaScript frame)';
    }
    itemOf.set(id, item);
    return item;
  };
  const counts = new Map<string, number>();
  let busy = 0;
  for (const sample of profile.samples) {
    const item = classify(sample);
    if (item === undefined) continue;
    busy += 1;
    counts.set(item, (counts.get(item) ?? 0) + 1);
  }
  return [...counts.entries()]
    .map(([item, samples]) => ({ item, samples, share: samples / Math.max(1, busy), usPerRequest: (samples / Math.max(1, busy)) * mainUsPerRequest }))
    .sort((a, b) => b.samples - a.samples);
}

export function printProfileItems(
  name: string,
  items: readonly ProfileItem[],
  window: { cpuUsPerRequest: number; mainUsPerRequest?: number; requests: number },
): void {
  const other = window.mainUsPerRequest === undefined ? undefined : window.cpuUsPerRequest - window.mainUsPerRequest;
  process.stdout.write(
    `\n${name}: ${window.cpuUsPerRequest} µs of CPU per request over ${window.requests} requests` +
      `${window.mainUsPerRequest === undefined ? '' : ` (main thread ${Math.round(window.mainUsPerRequest)}, other threads ${Math.round(other!)})`}\n`,
  );
  for (const { item, share, usPerRequest } of items)
    process.stdout.write(`  ${(share * 100).toFixed(1).padStart(5)} %  ${usPerRequest.toFixed(1).padStart(6)} µs  ${item}\n`);
}

// As a command: one profile's items.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [file, main, other] = process.argv.slice(2);
  if (!file || !main) {
    process.stderr.write('usage: node dist/bench/profile-items.js <file.cpuprofile> <main-thread CPU µs per request> [other threads µs]\n');
    process.exit(2);
  }
  const items = profileItems(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, Number(main));
  printProfileItems(file, items, {
    cpuUsPerRequest: Number(main) + Number(other ?? 0),
    requests: Number.NaN,
    ...(other && { mainUsPerRequest: Number(main) }),
  });
}
