import { describe, expect, it } from 'vitest';
import { profileItems, type CpuProfile } from '../../bench/profile-items.js';

/**
 * The bench's per-item split of a CPU profile (bench/profile-items.ts): a sample belongs to the
 * deepest frame of the gateway's own work on its stack, unless Fastify sits below that frame;
 * Node's layers get only what neither claims. Profiles built by hand, one stack per case.
 */

const dist = 'file:///repo/dist';
const frame = (functionName: string, url: string) => ({ functionName, url });

/** A profile whose samples are the given stacks (root first), each sampled `count` times. */
function profileOf(stacks: { frames: { functionName: string; url: string }[]; count: number }[]): CpuProfile {
  const nodes: CpuProfile['nodes'] = [{ id: 1, callFrame: frame('(root)', ''), children: [] }];
  const samples: number[] = [];
  for (const { frames, count } of stacks) {
    let parent = nodes[0]!;
    for (const callFrame of frames) {
      const node = { id: nodes.length + 1, callFrame, children: [] as number[] };
      nodes.push(node);
      parent.children!.push(node.id);
      parent = node;
    }
    for (let i = 0; i < count; i += 1) samples.push(parent.id);
  }
  return { nodes, samples };
}

const socketWrite = [frame('writeGeneric', 'node:internal/stream_base_commons'), frame('writev', '')];

describe('profileItems', () => {
  it("gives a socket write to whoever made it: ioredis's to the store, Fastify's reply's to Fastify", () => {
    const items = profileItems(
      profileOf([
        {
          frames: [
            frame('handler', `${dist}/src/edge/routes/card-route.js`),
            frame('sendCommand', 'file:///repo/node_modules/ioredis/built/Redis.js'),
            ...socketWrite,
          ],
          count: 3,
        },
        {
          frames: [frame('handler', `${dist}/src/edge/routes/card-route.js`), frame('send', 'file:///repo/node_modules/fastify/lib/reply.js'), ...socketWrite],
          count: 1,
        },
      ]),
      100,
    );
    expect(items).toEqual([
      { item: 'store calls (store code, ioredis)', samples: 3, share: 0.75, usPerRequest: 75 },
      { item: 'Fastify (routing, hooks, body read, reply)', samples: 1, share: 0.25, usPerRequest: 25 },
    ]);
  });

  it("gives a hook's work under Fastify to the hook, and leaves Node's layers only what nobody else claims", () => {
    const items = profileItems(
      profileOf([
        {
          frames: [
            frame('runHooks', 'file:///repo/node_modules/fastify/lib/hooks.js'),
            frame('guard', `${dist}/src/edge/bearer-guard.js`),
            frame('verify', 'file:///repo/node_modules/jose/dist/x.js'),
          ],
          count: 2,
        },
        { frames: [frame('onStreamRead', 'node:internal/stream_base_commons'), frame('(anonymous)', '')], count: 1 },
        { frames: [frame('parserOnHeadersComplete', 'node:_http_common')], count: 1 },
      ]),
      40,
    );
    expect(items.map(({ item, samples }) => [item, samples])).toEqual([
      ['token check (bearer guard, jose, verified-token cache, credential)', 2],
      ['Node: TLS and sockets', 1],
      ['Node: HTTP parser and messages', 1],
    ]);
  });

  it("counts Ajv's generated validators by name, garbage collection on its own, and leaves idle samples out of the shares", () => {
    const items = profileItems(
      profileOf([
        { frames: [frame('runPreParsing', 'file:///repo/node_modules/fastify/lib/route.js'), frame('validate12', '')], count: 1 },
        { frames: [frame('(garbage collector)', '')], count: 1 },
        { frames: [frame('(idle)', '')], count: 8 },
        { frames: [frame('toString', '')], count: 2 },
      ]),
      8,
    );
    expect(items).toEqual([
      { item: 'unattributed (native, no JavaScript frame)', samples: 2, share: 0.5, usPerRequest: 4 },
      { item: 'validation (Ajv, card rules)', samples: 1, share: 0.25, usPerRequest: 2 },
      { item: 'garbage collection (main thread)', samples: 1, share: 0.25, usPerRequest: 2 },
    ]);
  });
});
